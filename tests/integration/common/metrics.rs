//! walrelay's `/metrics` read as Prometheus reads it, a loopback port for
//! its listener, and whether its slot lag monitor reached a server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::relay::Relay;

/// A loopback port that was free a moment ago (for `[metrics] listen`).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The whole HTTP response of `GET /metrics`; `None` while nothing answers.
pub async fn scrape_text(port: u16) -> Option<String> {
    get_text(port, "/metrics").await
}

/// Scrapes `/metrics` of a one-pipeline process: `name{labels}` → value,
/// without the `pipeline` label (whatever the pipeline's name).
pub async fn scrape(port: u16) -> Option<HashMap<String, f64>> {
    let by_pipeline = scrape_pipelines(port).await?;
    let mut out = HashMap::new();
    for series in by_pipeline.into_values() {
        out.extend(series);
    }
    Some(out)
}

/// Scrapes `/metrics`: pipeline name → (`name{labels}` without the
/// `pipeline` label → value); the process's own series (`walrelay_up`,
/// `walrelay_build_info`) are under `""`.
pub async fn scrape_pipelines(port: u16) -> Option<HashMap<String, HashMap<String, f64>>> {
    let text = scrape_text(port).await?;
    let body = text.split("\r\n\r\n").nth(1)?;
    let mut out: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        if let Some((series, value)) = line.rsplit_once(' ') {
            if let Ok(v) = value.parse::<f64>() {
                let (pipeline, series) = split_pipeline(series);
                out.entry(pipeline).or_default().insert(series, v);
            }
        }
    }
    Some(out)
}

/// `name{pipeline="p",a="b"}` → (`p`, `name{a="b"}`); `name{pipeline="p"}`
/// → (`p`, `name`). walrelay writes the pipeline label first.
fn split_pipeline(series: &str) -> (String, String) {
    let Some((name, rest)) = series.split_once("{pipeline=\"") else {
        return (String::new(), series.to_owned());
    };
    let Some((pipeline, after)) = rest.split_once('"') else {
        return (String::new(), series.to_owned());
    };
    let series = match after.strip_prefix(',') {
        Some(labels) => format!("{name}{{{labels}"),
        None => name.to_owned(),
    };
    (pipeline.to_owned(), series)
}

/// The value of metric `name`, whatever its labels, in a scrape.
pub fn metric(m: &HashMap<String, f64>, name: &str) -> Option<f64> {
    m.iter()
        .find(|(k, _)| *k == name || k.starts_with(&format!("{name}{{")))
        .map(|(_, v)| *v)
}

/// Whether walrelay's slot lag monitor (its poll query) reached the server
/// of `client` within the last 5 s.
pub async fn lag_monitor_polled(client: &tokio_postgres::Client) -> bool {
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

/// Scrapes until `pred` holds, returning that scrape.
pub async fn wait_metrics(
    port: u16,
    what: &str,
    relay: &mut Relay,
    pred: impl Fn(&HashMap<String, f64>) -> bool,
) -> HashMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = HashMap::new();
    loop {
        if let Some(m) = scrape(port).await {
            if pred(&m) {
                return m;
            }
            last = m;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "metrics never showed {what}; last scrape: {last:?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A metric by its exact `name{labels}` key; NaN when absent.
pub fn get(m: &HashMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(f64::NAN)
}

/// The whole HTTP response of `GET path` on the metrics listener at
/// `port` (the operator's page, `/api/state`); `None` while nothing
/// answers.
pub async fn get_text(port: u16, path: &str) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).await.ok()?;
    Some(text)
}
