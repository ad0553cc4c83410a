//! The view from real registries: each test sets a process's metrics,
//! reads them through the state the listener serves (as JSON and back),
//! and checks the lines `walrelay status` writes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::run::CLEAR_SCREEN;
use super::snapshot::is_poll;
use super::view::render_view;
use super::*;
use crate::metrics::history::History;
use crate::metrics::page::state::State;
use crate::metrics::{KindLabel, Metrics, Process, ResultLabel, StatusLabel, TopicLabel};
use walrelay_proto::Lsn;

const URL: &str = "http://x/api/state";

/// What `process` serves at `/api/state` now, read back as `status` reads
/// it (through its JSON).
fn snapshot(process: &Process) -> Snapshot {
    let history = History::new(Duration::from_secs(5), Duration::from_secs(600));
    let state = State::of(process, &history, tokio::time::Instant::now());
    let json = serde_json::to_vec(&state).expect("the state encodes");
    Snapshot {
        url: URL.to_owned(),
        taken: Instant::now(),
        state: client::decode_state(URL, &json).expect("the state decodes"),
    }
}

fn count(m: &Metrics, topic: &str, n: u64) {
    m.events
        .get_or_create(&TopicLabel {
            topic: topic.into(),
        })
        .inc_by(n);
}

fn source(m: &Metrics, kind: &'static str) {
    m.source_info.get_or_create(&KindLabel { kind }).set(1);
}

fn ready(m: &Metrics) {
    m.streaming.store(true, Ordering::Relaxed);
    m.kafka_reachable.store(true, Ordering::Relaxed);
}

/// One WAL pipeline, streaming, with every line of the view filled.
fn wal_process() -> (Process, Arc<Metrics>) {
    let p = Process::new();
    let m = p.add_pipeline("default");
    source(&m, "wal");
    ready(&m);
    count(&m, "outbox.event.order", 40);
    count(&m, "outbox.event.a\"b", 2);
    m.transactions.inc_by(21);
    m.delivery_errors
        .get_or_create(&crate::metrics::CodeLabel {
            code: "MsgSizeTooLarge".into(),
        })
        .inc();
    m.reconnects.inc_by(3);
    m.in_flight.set(5);
    m.oldest_unacked_age.set(0.25);
    for _ in 0..100 {
        m.commit_to_ack.observe(0.005);
    }
    m.received_lsn.set(9_223_372_036_854_775_000);
    m.confirmed_lsn.set(22817176);
    m.slot_retained_wal.set(1 << 20);
    m.slot_confirmed_lag.set(32 << 20);
    for (status, on) in [("reserved", 1), ("lost", 0)] {
        m.slot_wal_status
            .get_or_create(&StatusLabel {
                status: status.into(),
            })
            .set(on);
    }
    m.slot_active.set(1);
    m.slot_alert_level
        .get_or_create(&KindLabel {
            kind: "retained_wal",
        })
        .set(0);
    (p, m)
}

#[test]
fn reads_the_figures_of_the_state() {
    let (p, _m) = wal_process();
    let s = snapshot(&p);
    let v = s.pipeline("default").unwrap();
    assert_eq!(s.names(), ["default"]);
    assert_eq!(v.events_total, 42);
    assert_eq!(v.events_by_topic["outbox.event.a\"b"], 2);
    assert_eq!(v.confirmed_lsn, Some(Lsn(22817176)));
    // Exact beyond f64's 53 bits.
    assert_eq!(v.received_lsn, Some(Lsn(9_223_372_036_854_775_000)));
    let slot = v.slot.as_ref().unwrap();
    assert_eq!(slot.wal_status.as_deref(), Some("reserved"));
    assert_eq!(s.state.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(PipelineState::of(v), PipelineState::Running);
}

#[test]
fn renders_values_and_rates() {
    let (p, m) = wal_process();
    let a = snapshot(&p);
    count(&m, "outbox.event.order", 20);
    m.confirmed_lsn.set(22819224);
    let mut b = snapshot(&p);
    b.taken = a.taken + Duration::from_secs(2);
    let text = render(&b, Some(&a));
    // One pipeline: its name, its lines, and no table.
    assert!(
        text.starts_with(&format!(
            "walrelay {} at {URL}\npipeline     default\nstate        up, ready\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(!text.contains("events/s"), "{text}");
    assert!(text.contains("confirmed    0/15C3198"), "{text}");
    assert!(text.contains("62 total, 10.0/s; 21 transactions"), "{text}");
    assert!(text.contains("1 delivery errors, 3 reconnects"), "{text}");
    assert!(
        text.contains("in flight    5 events, oldest unacked 0.2 s"),
        "{text}"
    );
    assert!(text.contains("active, wal_status reserved"), "{text}");
    assert!(
        text.contains("catching up: 32.0 MiB behind at 1.0 KiB/s, about 9 h 6 min left"),
        "{text}"
    );
    assert!(text.contains("mean 5.0 ms over 100 deliveries"), "{text}");
    assert!(
        text.contains("topics       outbox.event.order 60, outbox.event.a\"b 2"),
        "{text}"
    );
    assert!(
        !text.contains("pgoutput"),
        "no session yet, no protocol line: {text}"
    );
    m.proto_version.set(4);
    m.stream_aborts.inc_by(2);
    m.subxact_aborts.inc();
    let text = render(&snapshot(&p), None);
    assert!(
        text.contains(
            "protocol     pgoutput 4, streaming 'parallel'; 0 streamed, 2 aborted, 1 subtransactions rolled back"
        ),
        "{text}"
    );
    assert!(text.contains("alerts       retained_wal ok"), "{text}");
}

#[test]
fn renders_the_delivery_mode() {
    let (p, m) = wal_process();
    let text = render(&snapshot(&p), None);
    assert!(text.contains("mode         at-least-once"), "{text}");
    assert!(!text.contains("progress"), "{text}");

    m.exactly_once.set(1);
    for (result, n) in [("committed", 35), ("aborted", 2)] {
        m.kafka_transactions
            .get_or_create(&ResultLabel { result })
            .inc_by(n);
    }
    m.progress_committed_lsn.set(22817176);
    let text = render(&snapshot(&p), None);
    assert!(text.contains("mode         exactly-once"), "{text}");
    assert!(
        text.contains(
            "progress     committed 0/15C2998; 35 kafka transactions committed, 2 aborted"
        ),
        "{text}"
    );
    assert!(!text.contains("FENCED"), "{text}");

    m.progress_committed_events.set(1200);
    m.producer_fenced.set(1);
    let text = render(&snapshot(&p), None);
    assert!(
        text.contains(
            "committed 0/15C2998 (inside the transaction ending there: 1200 events committed)"
        ),
        "{text}"
    );
    assert!(text.contains("FENCED: another instance"), "{text}");

    m.progress_committed_lsn.set(0);
    let text = render(&snapshot(&p), None);
    assert!(
        text.contains("progress     nothing committed yet; 35"),
        "{text}"
    );
}

/// A polling pipeline holding `shards`, configured further by `configure`.
fn poll_process(shards: i64, configure: impl FnOnce(&Metrics)) -> (Process, Arc<Metrics>) {
    let p = Process::new();
    let m = p.add_pipeline("default");
    source(&m, "poll");
    m.poll_shards_held.set(shards);
    configure(&m);
    (p, m)
}

#[test]
fn renders_the_polling_source() {
    let (p, m) = poll_process(2, |m| {
        m.poll_unpublished.set(1200);
        m.poll_oldest_unpublished_age.set(185.0);
        m.poll_published.inc_by(5000);
        for (result, n) in [("published", 40), ("empty", 300), ("rolled_back", 1)] {
            m.poll_batches
                .get_or_create(&ResultLabel { result })
                .inc_by(n);
        }
        for (kind, n) in [("claim", 2), ("mark", 1)] {
            m.poll_errors.get_or_create(&KindLabel { kind }).inc_by(n);
        }
        m.poll_retention_deleted.inc_by(10);
        m.poll_notifications.inc_by(12);
    });
    let a = snapshot(&p);
    m.poll_published.inc_by(200);
    let mut b = snapshot(&p);
    b.taken = a.taken + Duration::from_secs(2);
    assert!(is_poll(b.pipeline("default").unwrap()));
    let text = render(&b, Some(&a));
    for line in [
        "source       polling; 2 shards held: publishing",
        "backlog      1200 unpublished rows, the oldest waiting 3 min 5 s; about 12 s to \
         publish at 100.0 rows/s",
        "published    5200 rows, 100.0/s; 10 deleted by retention",
        "batches      300 empty, 40 published, 1 rolled_back; 12 notifications",
        "poll errors  2 claim, 1 mark",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    // Nothing of a slot or the WAL.
    for wal in [
        "slot",
        "confirmed",
        "received",
        "replication lag",
        "pgoutput",
    ] {
        assert!(!text.contains(wal), "{wal:?} in a polling view:\n{text}");
    }
}

#[test]
fn renders_a_polling_hot_standby() {
    let (p, _m) = poll_process(0, |_| {});
    let s = snapshot(&p);
    assert!(is_poll(s.pipeline("default").unwrap()));
    let text = render(&s, None);
    assert!(
        text.contains("source       polling; no shard held: a hot standby"),
        "{text}"
    );
    assert!(text.contains("backlog      0 unpublished rows\n"), "{text}");
    assert!(text.contains("published    0 rows, rate n/a"), "{text}");
    assert!(text.contains("batches      none yet"), "{text}");
    assert!(text.contains("poll errors  none"), "{text}");
    assert!(!text.contains("slot"), "{text}");
}

#[test]
fn the_source_the_process_names_decides_the_view() {
    // The registry has the poll metrics in either mode: a WAL pipeline
    // shows its slot lines, nothing of polling.
    let (p, m) = wal_process();
    m.poll_shards_held.set(0);
    m.poll_unpublished.set(0);
    let s = snapshot(&p);
    assert!(!is_poll(s.pipeline("default").unwrap()));
    let text = render(&s, None);
    assert!(text.contains("active, wal_status reserved"), "{text}");
    assert!(
        !text.contains("poll errors") && !text.contains("backlog"),
        "{text}"
    );
    // Before the pipeline says which source it reads, it is a WAL pipeline
    // that has not streamed yet; once it says, its word decides.
    let p = Process::new();
    let m = p.add_pipeline("default");
    let text = render(&snapshot(&p), None);
    assert!(
        text.contains("slot         inactive, wal_status unknown"),
        "{text}"
    );
    assert!(text.contains("NOT READY: starting"), "{text}");
    for (kind, poll) in [("wal", false), ("poll", true)] {
        source(&m, kind);
        let s = snapshot(&p);
        assert_eq!(is_poll(s.pipeline("default").unwrap()), poll, "{kind}");
        m.source_info.get_or_create(&KindLabel { kind }).set(0);
    }
}

/// A process of two pipelines, from the real registries: `orders` on the
/// WAL, streaming; `billing` polling, stopped on a fatal error.
fn two_pipelines() -> (Process, [Arc<Metrics>; 2]) {
    let p = Process::new();
    let orders = p.add_pipeline("orders");
    let billing = p.add_pipeline("billing");
    for (m, kind) in [(&orders, "wal"), (&billing, "poll")] {
        source(m, kind);
        ready(m);
    }
    orders.proto_version.set(4);
    orders.slot_active.set(1);
    orders.confirmed_lsn.set(22817176);
    orders.received_lsn.set(22819224);
    orders.slot_confirmed_lag.set(4096);
    orders.replication_lag.set(0.25);
    count(&orders, "outbox.event.order", 40);
    billing.poll_shards_held.set(1);
    billing.poll_unpublished.set(1200);
    billing.poll_oldest_unpublished_age.set(185.0);
    billing.poll_published.inc_by(5000);
    count(&billing, "outbox.event.invoice", 5000);
    billing.set_ended(Some(
        "the outbox table \"billing.outbox\" was dropped".into(),
    ));
    (p, [orders, billing])
}

#[test]
fn renders_two_pipelines_one_failed() {
    let (p, [orders, _billing]) = two_pipelines();
    let a = snapshot(&p);
    count(&orders, "outbox.event.order", 20);
    orders.confirmed_lsn.set(22819224);
    let mut b = snapshot(&p);
    b.taken = a.taken + Duration::from_secs(2);
    assert_eq!(b.names(), ["orders", "billing"]);
    let state = |name| PipelineState::of(b.pipeline(name).unwrap());
    assert_eq!(state("orders"), PipelineState::Running);
    assert_eq!(state("billing"), PipelineState::Failed);
    let text = render(&b, Some(&a));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..5],
        [
            format!("walrelay {} at {URL}", env!("CARGO_PKG_VERSION")),
            "state        up; 2 pipelines: 1 running, 1 FAILED".to_owned(),
            "pipeline  source  state    events/s  behind".to_owned(),
            "orders    wal     running      10.0  lag 0.2 s, 4.0 KiB unconfirmed".to_owned(),
            "billing   poll    FAILED        0.0  (stopped)".to_owned(),
        ],
        "{text}"
    );
    // A section per pipeline, each with its own positions and rates.
    let orders_at = text.find("\npipeline orders\n").expect(&text);
    let billing_at = text.find("\npipeline billing\n").expect(&text);
    assert!(orders_at < billing_at, "{text}");
    let (orders_view, billing_view) = (&text[orders_at..billing_at], &text[billing_at..]);
    for line in [
        "state        ready",
        "confirmed    0/15C3198   received 0/15C3198",
        "events       60 total, 10.0/s; 0 transactions",
        "protocol     pgoutput 4, streaming 'parallel'",
        "topics       outbox.event.order 60",
    ] {
        assert!(orders_view.contains(line), "no {line:?} in:\n{orders_view}");
    }
    for line in [
        "state        FAILED: stopped on a fatal error: the outbox table \"billing.outbox\" \
         was dropped",
        "source       polling; stopped, its shard locks released with its connections",
        "backlog      1200 unpublished rows, the oldest waiting 3 min 5 s",
        "events       5000 total, 0.0/s",
        "topics       outbox.event.invoice 5000",
    ] {
        assert!(
            billing_view.contains(line),
            "no {line:?} in:\n{billing_view}"
        );
    }
    // Nothing of one pipeline in the other's section.
    assert!(!orders_view.contains("invoice") && !orders_view.contains("backlog"));
    assert!(!billing_view.contains("slot") && !billing_view.contains("outbox.event.order"));

    // Without the error it still says which one failed.
    let billing = b
        .state
        .pipelines
        .iter_mut()
        .find(|p| p.name == "billing")
        .unwrap();
    billing.error = None;
    billing.not_ready_reason = None;
    let text = render(&b, Some(&a));
    assert!(
        text.contains("state        FAILED: stopped on a fatal error (the log says which)"),
        "{text}"
    );
}

#[test]
fn one_pipeline_of_several() {
    let (p, _) = two_pipelines();
    let s = snapshot(&p);
    let text = render_view(&s, None, Some("billing")).unwrap();
    assert!(
        text.contains("pipeline     billing\nstate        up, FAILED"),
        "{text}"
    );
    assert!(!text.contains("orders"), "{text}");
    let err = render_view(&s, None, Some("shipping")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("walrelay at {URL} runs no pipeline \"shipping\"; it runs orders, billing")
    );
}

#[test]
fn states_from_the_figures() {
    let state = |configure: &dyn Fn(&Metrics)| {
        let p = Process::new();
        configure(&p.add_pipeline("default"));
        let s = snapshot(&p);
        (
            PipelineState::of(s.pipeline("default").unwrap()),
            render(&s, None),
        )
    };
    let wal = |m: &Metrics| source(m, "wal");
    // No replication session yet (a WAL standby waits here too), with the
    // reason /readyz gives.
    let (st, text) = state(&|m| wal(m));
    assert_eq!(st, PipelineState::Starting);
    assert!(
        text.contains(
            "up, NOT READY: starting, no replication session yet (connecting, or waiting for \
             the slot) (streaming=false kafka_reachable=false lag_critical=false)"
        ),
        "{text}"
    );
    // A session ran, then Kafka went away.
    let (st, text) = state(&|m| {
        wal(m);
        m.proto_version.set(2);
        m.streaming.store(true, Ordering::Relaxed);
    });
    assert_eq!(st, PipelineState::NotReady);
    assert!(
        text.contains("up, NOT READY (streaming=true kafka_reachable=false lag_critical=false)"),
        "{text}"
    );
    // Streaming with lag at critical.
    let (st, text) = state(&|m| {
        wal(m);
        m.proto_version.set(2);
        ready(m);
        m.lag_critical.store(true, Ordering::Relaxed);
        m.slot_alert_level
            .get_or_create(&KindLabel {
                kind: "lag_seconds",
            })
            .set(2);
    });
    assert_eq!(st, PipelineState::NotReady);
    assert!(text.contains("up, NOT READY: lag critical ("), "{text}");
    assert!(text.contains("alerts       lag_seconds CRITICAL"), "{text}");
    // A polling hot standby.
    let (st, text) = state(&|m| source(m, "poll"));
    assert_eq!(st, PipelineState::Standby);
    assert!(text.contains("up, NOT READY: no shard held"), "{text}");
    // Running.
    let (st, _) = state(&|m| {
        wal(m);
        ready(m);
    });
    assert_eq!(st, PipelineState::Running);
    // Failed wins over everything.
    let (st, _) = state(&|m| {
        wal(m);
        m.set_ended(Some("boom".into()));
    });
    assert_eq!(st, PipelineState::Failed);
}

#[test]
fn a_process_without_pipelines_yet() {
    let s = snapshot(&Process::new());
    let text = render(&s, None);
    assert!(
        text.ends_with("state        up; no pipeline started yet\n"),
        "{text}"
    );
    let err = render_view(&s, None, Some("orders")).unwrap_err();
    assert!(err.to_string().ends_with("it runs none yet"), "{err}");
}

/// `walrelay status` against a live process of two pipelines, one failed:
/// the view names it and the reason `/readyz` gives, and the command
/// succeeds (it reports states, it does not judge them).
#[tokio::test]
async fn status_of_a_live_process_with_a_failed_pipeline() {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let (p, _pipelines) = two_pipelines();
    let (addr, handle) = crate::metrics::serve("127.0.0.1:0", Arc::new(p), rx)
        .await
        .unwrap();
    let mut out = Vec::new();
    run_status_to(StatusOptions::for_addr(&addr.to_string()), &mut out)
        .await
        .expect("status reads a process with a failed pipeline");
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with(&format!(
            "walrelay {} at http://{addr}/api/state\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(
        text.contains("state        up; 2 pipelines: 1 running, 1 FAILED"),
        "{text}"
    );
    assert!(
        text.contains("FAILED: stopped on a fatal error: the outbox table"),
        "{text}"
    );
    let opts = StatusOptions {
        pipeline: Some("nope".into()),
        ..StatusOptions::for_addr(&addr.to_string())
    };
    let err = run_status_to(opts, &mut Vec::new()).await.unwrap_err();
    assert!(matches!(err, StatusError::NoSuchPipeline { .. }), "{err}");
    tx.send(true).unwrap();
    handle.await.unwrap();
    let err = run_status_to(StatusOptions::for_addr(&addr.to_string()), &mut Vec::new())
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("cannot connect to"), "{err}");
}

#[tokio::test]
async fn watch_redraws_until_stopped() {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let (addr, handle) = crate::metrics::serve("127.0.0.1:0", Default::default(), rx)
        .await
        .unwrap();
    let opts = StatusOptions {
        watch: Some(Duration::from_millis(50)),
        ..StatusOptions::for_addr(&addr.to_string())
    };
    let mut out = Vec::new();
    let ended =
        tokio::time::timeout(Duration::from_millis(600), run_status_to(opts, &mut out)).await;
    assert!(ended.is_err(), "watch ended by itself: {ended:?}");
    let text = String::from_utf8(out).unwrap();
    assert!(text.matches(CLEAR_SCREEN).count() >= 3, "{text}");
    assert!(text.contains("state        up"), "{text}");
    tx.send(true).unwrap();
    handle.await.unwrap();
}

/// A distributed worker's status names its group, which worker it is and
/// leads, and what every worker runs.
#[test]
fn renders_a_distributed_workers_group() {
    use crate::metrics::page::state::{GroupView, WorkerView};
    let (p, _) = two_pipelines();
    p.set_group_view(Box::new(|| GroupView {
        group_id: "connect-cluster".into(),
        worker_id: "10.0.0.1:8083".into(),
        generation: 7,
        leader: true,
        workers: vec![
            WorkerView {
                worker_id: "10.0.0.1:8083".into(),
                connectors: vec!["orders".into()],
            },
            WorkerView {
                worker_id: "10.0.0.2:8083".into(),
                connectors: vec![],
            },
        ],
    }));
    let text = render(&snapshot(&p), None);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..4],
        [
            "group        connect-cluster (generation 7); this worker 10.0.0.1:8083, the leader",
            "worker       10.0.0.1:8083 runs orders",
            "worker       10.0.0.2:8083 runs nothing",
        ],
        "{text}"
    );
}
