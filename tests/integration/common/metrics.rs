//! A running walrelay's listener read as `walrelay status` reads it (the
//! library's client: the typed `/api/state` for figures, any page as
//! text), a loopback port for its listener, and whether its slot lag
//! monitor reached a server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use walrelay::metrics::page::{PipelineView, State};
use walrelay::status::client;

use super::relay::Relay;

/// A loopback port that was free a moment ago (for `[metrics] listen`).
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// The state of the walrelay listening on `port`; `None` while nothing
/// answers.
pub(crate) async fn state(port: u16) -> Option<State> {
    client::fetch_state(&addr(port)).await.ok()
}

/// The one pipeline of a one-pipeline process, whatever its name; `None`
/// while nothing answers.
pub(crate) async fn pipeline(port: u16) -> Option<PipelineView> {
    let mut state = state(port).await?;
    assert!(
        state.pipelines.len() <= 1,
        "a process of several pipelines: {:?}",
        state.pipelines.iter().map(|p| &p.name).collect::<Vec<_>>()
    );
    state.pipelines.pop()
}

/// Reads the one pipeline of the process until `pred` holds, returning
/// that reading.
pub(crate) async fn wait_pipeline(
    port: u16,
    what: &str,
    relay: &mut Relay,
    pred: impl Fn(&PipelineView) -> bool,
) -> PipelineView {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = None;
    loop {
        if let Some(p) = pipeline(port).await {
            if pred(&p) {
                return p;
            }
            last = Some(p);
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "the state never showed {what}; last reading: {last:?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `GET path` on the listener at `port`: (status code, body); `None`
/// while nothing answers.
pub(crate) async fn get_text(port: u16, path: &str) -> Option<(u16, String)> {
    let answer = client::get(&addr(port), path).await.ok()?;
    Some((answer.status.as_u16(), answer.text()?.to_owned()))
}

/// The series of `/metrics`, `name{labels}` → value (without the
/// `pipeline` label), for the tests of the exposition itself; figures are
/// read from [`state`]. `None` while nothing answers.
pub(crate) async fn exposition(port: u16) -> Option<HashMap<String, f64>> {
    let (status, text) = get_text(port, "/metrics").await?;
    assert_eq!(status, 200, "{text}");
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some((series, value)) = line.rsplit_once(' ') {
            if let Ok(v) = value.parse::<f64>() {
                out.insert(without_pipeline(series), v);
            }
        }
    }
    Some(out)
}

/// `name{pipeline="p",a="b"}` → `name{a="b"}`; `name{pipeline="p"}` →
/// `name`. walrelay writes the pipeline label first.
fn without_pipeline(series: &str) -> String {
    let Some((name, rest)) = series.split_once("{pipeline=\"") else {
        return series.to_owned();
    };
    let Some((_, after)) = rest.split_once('"') else {
        return series.to_owned();
    };
    match after.strip_prefix(',') {
        Some(labels) => format!("{name}{{{labels}"),
        None => name.to_owned(),
    }
}

/// Whether walrelay's slot lag monitor (its poll query) reached the server
/// of `client` within the last 5 s.
pub(crate) async fn lag_monitor_polled(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT coalesce(max(query_start) > now() - interval '5 seconds', false) \
             FROM pg_stat_activity WHERE query LIKE 'SELECT active, wal_status%'",
            &[],
        )
        .await
        .expect("read pg_stat_activity")
        .get(0)
}
