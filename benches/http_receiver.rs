//! The HTTP receiver of the broker drains (`benches/walbench`, `--brokers
//! http`): a server that answers every `POST` (or `PUT`) with `200` and an
//! empty body, and counts what arrived per URL path, so that a drain knows
//! when it ended and when its first and last requests came, on the
//! receiver's own clock (as a broker's stored time is for NATS and Redis).
//! It must not be what a drain measures: hyper's HTTP/1.1 server on one
//! tokio thread, keep-alive, no logging, a few atomics-free counters behind
//! one uncontended lock. `benches/run.sh --brokers http` builds it with
//! `cargo build --release --bench http_receiver`; `walbench
//! --http-ceiling` measures it alone (docs/benchmarks.md gives the ceiling).
//!
//! Usage: `http_receiver [PORT]` (0 or none: any free port) on 127.0.0.1.
//! It prints `port=<PORT>` on stdout once it listens, and exits when its
//! standard input closes (the driver holds a pipe to it, so it never
//! outlives the driver).
//!
//! Per path it keeps: requests, distinct events (requests whose
//! `X-DEBEZIUM-ID` header, the event id both systems send, was not seen
//! before on that path; a request without it counts as distinct), body
//! bytes, header bytes (names and values as received), the Unix time in
//! nanoseconds of the first request and of the one that brought the last
//! new event (taken when the whole body has been read, before the answer).
//! A drain ends at its events' count of distinct ones: a request sent
//! twice (a client's retry) is counted, not taken for another event.
//! Control, under `/_walbench/` (never counted):
//! - `GET /_walbench/stats?path=/x`: that path's counters as one JSON
//!   object `{"requests":N,"distinct":N,"body_bytes":N,"header_bytes":N,
//!   "first_ns":N,"last_ns":N}` (zeros for a path never seen);
//! - `DELETE /_walbench/stats?path=/x`: forgets that path.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[derive(Default, Clone, Copy)]
struct Stats {
    requests: u64,
    distinct: u64,
    body_bytes: u64,
    header_bytes: u64,
    first_ns: u128,
    last_ns: u128,
}

#[derive(Default)]
struct PathState {
    stats: Stats,
    ids: HashSet<Bytes>,
}

type Table = Arc<Mutex<HashMap<String, PathState>>>;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn control_path(query: Option<&str>) -> String {
    // The query is `path=<path>`, the path as the driver wrote it (no
    // percent-encoding needed for the bench's paths).
    query
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("path=")))
        .unwrap_or("")
        .to_string()
}

fn answer(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r
}

async fn handle(table: Table, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/_walbench/") {
        if rest != "stats" {
            return Ok(answer(StatusCode::NOT_FOUND, String::new()));
        }
        let key = control_path(req.uri().query());
        let mut t = table.lock().expect("stats lock");
        return Ok(match *req.method() {
            Method::GET => {
                let s = t.get(&key).map(|p| p.stats).unwrap_or_default();
                answer(
                    StatusCode::OK,
                    format!(
                        "{{\"requests\":{},\"distinct\":{},\"body_bytes\":{},\"header_bytes\":{},\"first_ns\":{},\"last_ns\":{}}}",
                        s.requests, s.distinct, s.body_bytes, s.header_bytes, s.first_ns, s.last_ns
                    ),
                )
            }
            Method::DELETE => {
                t.remove(&key);
                answer(StatusCode::OK, String::new())
            }
            _ => answer(StatusCode::METHOD_NOT_ALLOWED, String::new()),
        });
    }
    let header_bytes: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    let id = req
        .headers()
        .get("x-debezium-id")
        .map(|v| Bytes::copy_from_slice(v.as_bytes()));
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(answer(StatusCode::BAD_REQUEST, String::new())),
    };
    let t_ns = now_ns();
    {
        let mut t = table.lock().expect("stats lock");
        let p = t.entry(path).or_default();
        let new = match id {
            Some(id) => p.ids.insert(id),
            None => true,
        };
        let s = &mut p.stats;
        if s.requests == 0 {
            s.first_ns = t_ns;
        }
        s.requests += 1;
        s.body_bytes += body.len() as u64;
        s.header_bytes += header_bytes as u64;
        if new {
            s.distinct += 1;
            s.last_ns = t_ns;
        }
    }
    Ok(Response::new(Full::new(Bytes::new())))
}

fn main() -> std::process::ExitCode {
    let port: u16 = match std::env::args().nth(1).map(|p| p.parse()) {
        None => 0,
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            eprintln!("http_receiver: PORT: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .expect("bind");
        println!("port={}", listener.local_addr().expect("local addr").port());
        // Standard input closing ends the receiver (read on a thread of its own).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.blocking_send(());
        });
        let table: Table = Arc::default();
        loop {
            tokio::select! {
                _ = rx.recv() => return,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let table = table.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| handle(table.clone(), req));
                        let _ = http1::Builder::new()
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            }
        }
    });
    std::process::ExitCode::SUCCESS
}
