//! The operator's page (`GET /` of the metrics listener) in a real browser:
//! a walrelay with two pipelines (a table outbox read from the WAL of the
//! shared cluster, and a polled outbox on the `wal_level = replica`
//! cluster whose name is markup), events relayed, then Debian's headless
//! Chromium loads the page and the DOM it rendered is read: both pipelines,
//! their states, sources, positions and event counts, the name written as
//! text, charts drawn. Then the WAL pipeline's slot is dropped behind its
//! back, and the page shows it failed, with the reason.
//!
//! Chromium is `chromium` on the `PATH` (or `WALRELAY_CHROMIUM`);
//! `scripts/test.sh` installs it (`scripts/browser.sh`). Without it the test
//! fails: it never skips.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::metrics::{free_port, state};
use crate::common::relay::{tail, Outbox, Relay, WAIT};
use crate::common::{
    connect_url, consume, create_topic, env, kafka_bootstrap, pg_replica_port, pg_replica_url,
    unique_name,
};
use walrelay::metrics::page::state::{Lifecycle, State};

/// The polled pipeline's name: markup, which the page must show as text.
const BILLING: &str = "billing <i>x</i> & co";
/// [`BILLING`] as the text of an element in serialized HTML.
const BILLING_ESCAPED: &str = "billing &lt;i&gt;x&lt;/i&gt; &amp; co";
/// Events written to each outbox.
const WAL_EVENTS: u64 = 20;
const POLL_EVENTS: u64 = 15;
/// How long Chromium runs the page (virtual time: fetches and timers)
/// before it writes the DOM.
const VIRTUAL_TIME_MS: u32 = 5000;
/// How long a Chromium run may take in real time.
const BROWSER_BOUND: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_every_pipeline_in_a_real_browser() {
    let browser = chromium();
    let ob = Outbox::new("page_wal").await;
    let poll_client = connect_url(&pg_replica_url()).await;
    let poll_table = unique_name("page_poll");
    poll_client
        .batch_execute(&format!(
            "CREATE TABLE {poll_table} (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id uuid PRIMARY KEY,
                aggregatetype varchar(255) NOT NULL,
                aggregateid varchar(255),
                type varchar(255) NOT NULL,
                payload jsonb,
                published_at timestamptz
            );
            CREATE INDEX ON {poll_table} (seq) WHERE published_at IS NULL"
        ))
        .await
        .expect("create the polled outbox table");
    let poll_topic = format!("outbox.event.{poll_table}");
    create_topic(&ob.topic(""), 1).await;
    create_topic(&poll_topic, 1).await;

    let port = free_port();
    let mut relay = Relay::start(&config(&ob, &poll_table, port));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, WAL_EVENTS).await;
    poll_client
        .execute(
            &format!(
                "INSERT INTO {poll_table} (id, aggregatetype, aggregateid, type, payload) \
                 SELECT gen_random_uuid(), $1, 'k' || (g % 3), 'E', jsonb_build_object('n', g) \
                 FROM generate_series(1, {POLL_EVENTS}) g"
            ),
            &[&poll_table],
        )
        .await
        .expect("insert polled rows");
    assert_eq!(
        consume(&ob.topic(""), WAL_EVENTS as usize, WAIT)
            .await
            .len() as u64,
        WAL_EVENTS
    );
    assert_eq!(
        consume(&poll_topic, POLL_EVENTS as usize, WAIT).await.len() as u64,
        POLL_EVENTS
    );

    // Until the counters show the events and the history has three
    // samples (two rates: a line, not a dot).
    wait_state(
        port,
        &mut relay,
        "both pipelines' events and history",
        |s| {
            let p = &s.pipelines;
            p.len() == 2
                && p[0].events_total >= WAL_EVENTS
                && p[1].events_total >= POLL_EVENTS
                && p.iter()
                    .all(|p| p.state == Lifecycle::Running && p.history.len() >= 3)
        },
    )
    .await;

    let dom = dump_dom(&browser, port).await;
    let rows = table_rows(&dom);
    let wal = row(&rows, &ob.name, &dom);
    assert_eq!(wal.cells[1], "running", "state: {wal:?}");
    assert_eq!(wal.cells[2], "wal", "source: {wal:?}");
    assert_eq!(wal.cells[3], "kafka", "broker: {wal:?}");
    for (i, what) in [(4, "received"), (5, "confirmed")] {
        assert!(
            is_nonzero_lsn(&wal.cells[i]),
            "{what} LSN {:?} is not X/Y past 0/0: {wal:?}",
            wal.cells[i]
        );
    }
    assert!(count(&wal.cells[9]) >= WAL_EVENTS, "events: {wal:?}");
    let billing = row(&rows, BILLING, &dom);
    assert_eq!(billing.cells[1], "running", "state: {billing:?}");
    assert_eq!(billing.cells[2], "poll", "source: {billing:?}");
    assert_eq!(billing.cells[3], "kafka", "broker: {billing:?}");
    assert!(
        billing.cells[4].ends_with(" unpublished"),
        "position: {billing:?}"
    );
    assert!(
        count(&billing.cells[9]) >= POLL_EVENTS,
        "events: {billing:?}"
    );
    // Written as text: the name's markup is escaped, no element made of it.
    assert!(
        billing.html.contains(&format!(">{BILLING_ESCAPED}</td>")),
        "the name must be text, not markup: {}",
        billing.html
    );
    // A card per pipeline, each with its charts drawn: the events/s chart
    // has a line through two points or more.
    let cards: Vec<&str> = dom.split("<section class=\"card\"").skip(1).collect();
    assert_eq!(cards.len(), 2, "one card per pipeline:\n{dom}");
    for card in cards {
        assert_eq!(card.matches("<svg").count(), 3, "three charts: {card}");
        let rate = card
            .split("<svg")
            .find(|svg| svg.contains("class=\"chart rate\""))
            .unwrap_or_else(|| panic!("no events/s chart: {card}"));
        let points = attribute(rate, "data-points")
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        assert!(
            points >= 2,
            "the events/s chart has {points} points: {rate}"
        );
        let line =
            attribute(rate.split("<polyline").nth(1).unwrap_or(""), "points").unwrap_or_default();
        assert!(
            line.split(' ').filter(|p| p.contains(',')).count() >= 2,
            "no line drawn: {rate}"
        );
        assert!(rate.contains(">now</text>"), "no time axis: {rate}");
    }

    // Break the WAL pipeline: its walsender terminated and its slot
    // dropped before the reconnect takes it again. The pipeline stops
    // fatally; the polled one runs on.
    ob.drop_slot_behind_its_back().await;
    wait_state(port, &mut relay, "the WAL pipeline failed", |s| {
        s.pipelines
            .first()
            .is_some_and(|p| p.state == Lifecycle::Failed)
    })
    .await;
    let dom = dump_dom(&browser, port).await;
    let rows = table_rows(&dom);
    let wal = row(&rows, &ob.name, &dom);
    assert_eq!(wal.cells[1], "failed", "state: {wal:?}");
    let at = rows
        .iter()
        .position(|r| r.cells[0] == ob.name)
        .expect("the row was found");
    let error = rows
        .get(at + 1)
        .filter(|r| r.html.contains("class=\"error\""))
        .unwrap_or_else(|| panic!("no error row after the failed pipeline:\n{dom}"));
    assert!(
        error.cells[0].contains(&format!("replication slot {} no longer exists", ob.name)),
        "the reason: {error:?}"
    );
    assert_eq!(
        row(&rows, BILLING, &dom).cells[1],
        "running",
        "the other pipeline runs on"
    );

    ob.finish_exited(relay).await;
    poll_client
        .batch_execute(&format!("DROP TABLE {poll_table}"))
        .await
        .expect("drop the polled outbox table");
}

/// Two pipelines in the native TOML: `ob.name` (the WAL of the shared
/// cluster) and [`BILLING`] (polling `poll_table` on the replica cluster).
fn config(ob: &Outbox, poll_table: &str, port: u16) -> String {
    format!(
        r#"
[kafka]
bootstrap_servers = "{bootstrap}"
[kafka.producer]
"linger.ms" = "2"

[metrics]
listen = "127.0.0.1:{port}"

[[pipelines]]
name = "{wal}"
[pipelines.postgres]
host = "127.0.0.1"
port = {wal_port}
user = "postgres"
dbname = "postgres"
[pipelines.replication]
slot = "{wal}"
publication = "{wal}"
status_interval_ms = 200
reconnect_min_ms = 100
reconnect_max_ms = 1000
[pipelines.outbox]
table = "public.{wal}"
[pipelines.lag]
poll_interval_ms = 500

[[pipelines]]
name = "{BILLING}"
[pipelines.source]
kind = "poll"
[pipelines.postgres]
host = "127.0.0.1"
port = {poll_port}
user = "postgres"
dbname = "postgres"
[pipelines.replication]
reconnect_min_ms = 100
reconnect_max_ms = 1000
[pipelines.outbox]
table = "public.{poll_table}"
[pipelines.poll]
order_by = ["seq"]
interval_ms = 100
lock_retry_ms = 200
stats_interval_ms = 200
"#,
        bootstrap = kafka_bootstrap(),
        wal = ob.name,
        wal_port = env().pg_port,
        poll_port = pg_replica_port(),
    )
}

/// The browser: `WALRELAY_CHROMIUM`, else `chromium` on the `PATH`. Panics
/// when there is none: the test must not pass without a browser.
pub(crate) fn chromium() -> String {
    let browser = std::env::var("WALRELAY_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let found = Command::new(&browser)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "no browser: `{browser} --version` did not run. The operator page's test needs \
         Debian's chromium: scripts/test.sh installs it (scripts/browser.sh), or apt-get \
         install chromium (or set WALRELAY_CHROMIUM)"
    );
    browser
}

/// Reads `/api/state` until `pred` holds.
async fn wait_state(port: u16, relay: &mut Relay, what: &str, pred: impl Fn(&State) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = None;
    loop {
        if let Some(s) = state(port).await {
            if pred(&s) {
                return;
            }
            last = Some(s);
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "/api/state never showed {what}; last: {last:?}\n{}",
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The DOM headless Chromium rendered from the page at `port`, after
/// [`VIRTUAL_TIME_MS`] of the page's own time (its fetches of
/// `/api/state` and its refresh timer run).
async fn dump_dom(browser: &str, port: u16) -> String {
    dump_dom_at(browser, &format!("http://127.0.0.1:{port}/"), &[]).await
}

/// The DOM headless Chromium rendered from the page at `url` (run with
/// the extra flags `flags`), as [`dump_dom`].
pub(crate) async fn dump_dom_at(browser: &str, url: &str, flags: &[&str]) -> String {
    let browser = browser.to_owned();
    let url = url.to_owned();
    let flags: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("a directory for the browser");
        let out = dir.path().join("dom.html");
        let err = dir.path().join("chromium.log");
        let mut child = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .arg(format!("--virtual-time-budget={VIRTUAL_TIME_MS}"))
            .args(&flags)
            .arg("--dump-dom")
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("the DOM file"))
            .stderr(std::fs::File::create(&err).expect("the browser's log"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {browser}: {e}"));
        let deadline = Instant::now() + BROWSER_BOUND;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the browser") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{browser} still runs after {BROWSER_BOUND:?}:\n{}",
                    read(&err)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let dom = read(&out);
        assert!(
            status.success() && dom.contains("</html>"),
            "{browser} failed ({status}):\n{}\n{dom}",
            read(&err)
        );
        dom
    })
    .await
    .expect("the browser thread")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A row of the pipelines table: its HTML and its cells' text.
#[derive(Debug)]
struct Row {
    html: String,
    cells: Vec<String>,
}

/// The rows of the pipelines table's body, in order.
fn table_rows(dom: &str) -> Vec<Row> {
    let body = dom
        .split_once("<tbody>")
        .and_then(|(_, rest)| rest.split_once("</tbody>"))
        .map_or("", |(body, _)| body);
    body.split("<tr")
        .skip(1)
        .map(|tr| {
            let html = tr.split("</tr>").next().unwrap_or("").to_owned();
            let cells = html
                .split("<td")
                .skip(1)
                .map(|td| {
                    let inner = td.split_once('>').map_or("", |(_, r)| r);
                    text(inner.split("</td>").next().unwrap_or(""))
                })
                .collect();
            Row { html, cells }
        })
        .collect()
}

/// The row whose first cell is `name`; panics with the DOM when none is.
fn row<'a>(rows: &'a [Row], name: &str, dom: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.cells.len() == 11 && r.cells[0] == name)
        .unwrap_or_else(|| panic!("no row for pipeline {name:?}:\n{dom}"))
}

/// The text of an HTML fragment: tags dropped, entities decoded.
fn text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The value of the first attribute `name` in an HTML fragment.
fn attribute(html: &str, name: &str) -> Option<String> {
    let start = html.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = html[start..].find('"')?;
    Some(html[start..start + len].to_owned())
}

/// `X/Y` in hex, past `0/0`.
fn is_nonzero_lsn(s: &str) -> bool {
    let Some((hi, lo)) = s.split_once('/') else {
        return false;
    };
    match (u64::from_str_radix(hi, 16), u64::from_str_radix(lo, 16)) {
        (Ok(hi), Ok(lo)) => (hi, lo) != (0, 0),
        _ => false,
    }
}

/// A count as the page writes it (`1,234`).
fn count(s: &str) -> u64 {
    s.replace(',', "").parse().unwrap_or(0)
}
