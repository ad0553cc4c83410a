//! The rows of a broker other than Kafka (`sink.type`): it answers, and it
//! will store what the router publishes: for NATS, a JetStream stream
//! captures each subject (or `create_stream` will create one); for Redis,
//! no key of another type holds a stream's name. Read-only and bounded by
//! [`super::KAFKA_TIMEOUT`], like the Kafka rows.

use std::collections::BTreeSet;

use super::columns::RouteValues;
use super::report::{CheckReport, BROKER_CONNECTION, BROKER_DESTINATIONS};
use super::KAFKA_TIMEOUT;
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::sink::aws::{kinesis, sns, sqs};
use crate::sink::config::SinkKind;
use crate::sink::{nats, rabbitmq, rabbitmq_stream, redis};

/// The destinations the router would publish to, from the route values
/// read in the outbox (and the heartbeat's, when on).
fn destinations(config: &Config, route_values: &RouteValues) -> Result<BTreeSet<String>, String> {
    let (rewrite, _) = config
        .router
        .compile()
        .map_err(|e| format!("the routing configuration is invalid: {}", DisplayChain(&e)))?;
    let mut wanted: BTreeSet<String> = match route_values {
        Some(Ok(values)) => values.iter().map(|v| rewrite.apply(v)).collect(),
        _ => BTreeSet::new(),
    };
    if config.heartbeat.interval_ms > 0 {
        wanted.insert(config.heartbeat.topic(&config.debezium.topic_prefix));
    }
    Ok(wanted)
}

/// The broker rows of `config`'s sink.
pub(super) async fn check_broker(
    config: &Config,
    route_values: RouteValues,
    report: &mut CheckReport,
) {
    let wanted = match destinations(config, &route_values) {
        Ok(w) => w,
        Err(e) => {
            report.fail(
                BROKER_DESTINATIONS,
                e,
                "fix router.route_topic_regex / router.route_topic_replacement",
            );
            BTreeSet::new()
        }
    };
    match config.sink.kind {
        SinkKind::Kafka => {}
        SinkKind::NatsJetStream => check_nats(config, &wanted, report).await,
        SinkKind::Redis => check_redis(config, &wanted, report).await,
        SinkKind::RabbitMq => check_rabbitmq(config, &wanted, report).await,
        SinkKind::RabbitMqStream => check_rabbitmq_stream(config, &wanted, report).await,
        SinkKind::Http => check_http(config, report).await,
        SinkKind::Sqs | SinkKind::Sns | SinkKind::Kinesis => {
            check_aws(config, &wanted, report).await;
        }
        SinkKind::PubSub => check_pubsub(config, &wanted, report).await,
        SinkKind::Pulsar => check_pulsar(config, &wanted, report).await,
    }
}

/// What the rows say when a broker's probe fails.
struct Unanswered<'a> {
    /// The broker, in the skipped destinations row ("nats unreachable").
    what: &'a str,
    /// The address, in the timeout's detail, when the config has one.
    at: Option<&'a str>,
    /// The fix when the broker answered with an error.
    refused_fix: &'a str,
    /// The fix when nothing answered within [`KAFKA_TIMEOUT`].
    silent_fix: &'a str,
}

/// The probe's answer within [`KAFKA_TIMEOUT`]; or, failing that, the
/// connection row failed, the destinations row skipped, and `None`.
async fn probe<T>(
    probing: impl std::future::Future<Output = Result<T, String>>,
    unanswered: &Unanswered<'_>,
    report: &mut CheckReport,
) -> Option<T> {
    let (detail, fix) = match tokio::time::timeout(KAFKA_TIMEOUT, probing).await {
        Ok(Ok(answer)) => return Some(answer),
        Ok(Err(e)) => (e, unanswered.refused_fix),
        Err(_) => {
            let from = unanswered
                .at
                .map(|a| format!(" from {a}"))
                .unwrap_or_default();
            let detail = format!("no answer{from} within {KAFKA_TIMEOUT:?}");
            (detail, unanswered.silent_fix)
        }
    };
    report.fail(BROKER_CONNECTION, detail, fix);
    let why = format!("{} unreachable", unanswered.what);
    report.skip(BROKER_DESTINATIONS, &why);
    None
}

async fn check_nats(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let Some(cfg) = &config.sink.nats else {
        return;
    };
    let shown = cfg.shown_url();
    let unanswered = Unanswered {
        what: "nats",
        at: Some(shown.as_str()),
        refused_fix: "check sink.nats.url and its credentials",
        silent_fix: "check sink.nats.url and that nats-server runs",
    };
    let Some((about, context)) = probe(nats::probe(cfg), &unanswered, report).await else {
        return;
    };
    report.pass(BROKER_CONNECTION, about);
    if cfg.create_stream {
        report.pass(
            BROKER_DESTINATIONS,
            "create_stream: walrelay creates the stream at start if it is missing",
        );
        return;
    }
    let mut missing = Vec::new();
    let mut found = Vec::new();
    for subject in wanted {
        match nats::stream_for(&context, subject).await {
            Ok(Some(stream)) => found.push(format!("{subject} → {stream}")),
            Ok(None) => missing.push(subject.clone()),
            Err(e) => missing.push(format!("{subject} ({e})")),
        }
    }
    if missing.is_empty() {
        report.pass(
            BROKER_DESTINATIONS,
            if found.is_empty() {
                "no route values in the outbox yet".to_owned()
            } else {
                found.join(", ")
            },
        );
    } else {
        report.fail(
            BROKER_DESTINATIONS,
            format!("no JetStream stream captures {}", missing.join(", ")),
            "create a stream for these subjects (nats stream add), or set sink.nats.create_stream = true; \
             until then walrelay waits and the slot holds the events",
        );
    }
}

async fn check_redis(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let Some(cfg) = &config.sink.redis else {
        return;
    };
    let keys: Vec<String> = wanted.iter().cloned().collect();
    let unanswered = Unanswered {
        what: "redis",
        at: Some(cfg.address.as_str()),
        refused_fix: "check sink.redis.address and its credentials",
        silent_fix: "check sink.redis.address and that redis-server runs",
    };
    let Some((about, types)) = probe(redis::probe(cfg, &keys), &unanswered, report).await else {
        return;
    };
    report.pass(BROKER_CONNECTION, about);
    let wrong: Vec<String> = types
        .iter()
        .filter(|(_, t)| t != "none" && t != "stream")
        .map(|(k, t)| format!("{k} is a {t}"))
        .collect();
    if wrong.is_empty() {
        report.pass(
            BROKER_DESTINATIONS,
            format!("{} stream key(s) free or streams already", types.len()),
        );
    } else {
        report.fail(
            BROKER_DESTINATIONS,
            wrong.join(", "),
            "XADD refuses a key of another type (WRONGTYPE): rename or remove the key, or route elsewhere",
        );
    }
}

async fn check_rabbitmq(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let Some(cfg) = &config.sink.rabbitmq else {
        return;
    };
    let destinations: Vec<String> = wanted.iter().cloned().collect();
    let unanswered = Unanswered {
        what: "rabbitmq",
        at: None,
        refused_fix: "check sink.rabbitmq's address and credentials",
        silent_fix: "check sink.rabbitmq's address and that rabbitmq-server runs",
    };
    let probing = rabbitmq::probe(cfg, &destinations);
    let Some((about, exchanges)) = probe(probing, &unanswered, report).await else {
        return;
    };
    report.pass(BROKER_CONNECTION, about);
    let missing = missing(exchanges.as_slice());
    if missing.is_empty() {
        report.pass(
            BROKER_DESTINATIONS,
            format!("{} exchange(s) exist", exchanges.len()),
        );
    } else {
        report.fail(
            BROKER_DESTINATIONS,
            format!("no exchange {}", missing.join(", ")),
            "declare the exchanges (walrelay never declares one), or set sink.rabbitmq.exchange; \
             a record to a missing exchange is refused and follows [errors]",
        );
    }
}

/// RabbitMQ streams: the stream port answers; each stream exists, or will
/// be created on first use (`create_streams`, on by default).
async fn check_rabbitmq_stream(
    config: &Config,
    wanted: &BTreeSet<String>,
    report: &mut CheckReport,
) {
    let cfg = config.sink.rabbitmqstream.clone().unwrap_or_default();
    let destinations: Vec<String> = wanted.iter().cloned().collect();
    let unanswered = Unanswered {
        what: "rabbitmq streams",
        at: None,
        refused_fix: "check sink.rabbitmqstream's host, port and credentials, and that the \
                      rabbitmq_stream plugin is enabled",
        silent_fix: "check sink.rabbitmqstream's host and port (the stream listener, 5552) and \
                     the advertised host the broker gives (stream.advertised_host)",
    };
    let probing = rabbitmq_stream::probe(&cfg, &destinations);
    let Some((about, streams)) = probe(probing, &unanswered, report).await else {
        return;
    };
    report.pass(BROKER_CONNECTION, about);
    let missing = missing(streams.as_slice());
    if missing.is_empty() {
        report.pass(
            BROKER_DESTINATIONS,
            format!("{} stream(s) exist", streams.len()),
        );
    } else if cfg.create_streams.unwrap_or(true) {
        report.pass(
            BROKER_DESTINATIONS,
            format!("{} will be created on first use", missing.join(", ")),
        );
    } else {
        report.fail(
            BROKER_DESTINATIONS,
            format!("no stream {}", missing.join(", ")),
            "declare the streams, or set sink.rabbitmqstream.create_streams = true; \
             a record to a missing stream is refused and follows [errors]",
        );
    }
}

/// HTTP: the receiver accepts a connection (nothing is sent: a request
/// would be an event); every record goes to the one URL.
async fn check_http(config: &Config, report: &mut CheckReport) {
    let Some(cfg) = &config.sink.http else {
        return;
    };
    let uri: hyper::Uri = match cfg.url.parse() {
        Ok(u) => u,
        Err(e) => {
            report.fail(
                BROKER_CONNECTION,
                format!("not a URL: {e}"),
                "fix sink.http.url",
            );
            report.skip(BROKER_DESTINATIONS, "no URL");
            return;
        }
    };
    let host = uri.host().unwrap_or_default().to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(KAFKA_TIMEOUT, connect).await {
        Ok(Ok(_)) => report.pass(
            BROKER_CONNECTION,
            format!("http receiver at {host}:{port} accepts connections (no request sent)"),
        ),
        Ok(Err(e)) => report.fail(
            BROKER_CONNECTION,
            format!("cannot connect to {host}:{port}: {e}"),
            "check sink.http.url and that the receiver runs",
        ),
        Err(_) => report.fail(
            BROKER_CONNECTION,
            format!("no answer from {host}:{port} within {KAFKA_TIMEOUT:?}"),
            "check sink.http.url and that the receiver runs",
        ),
    }
    report.pass(
        BROKER_DESTINATIONS,
        format!("every record is POSTed to the one URL, on {host}:{port}"),
    );
}

/// What an AWS broker's rows need: its name, endpoint, and the fixes.
struct AwsRows<'a> {
    what: &'static str,
    endpoint: Option<&'a str>,
    refused_fix: &'static str,
    silent_fix: &'static str,
    destinations_fix: &'static str,
}

/// Pub/Sub: the credentials sign and each destination's topic exists
/// (`GetTopic`).
async fn check_pubsub(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let destinations: Vec<String> = wanted.iter().cloned().collect();
    let pubsub = config.sink.pubsub.clone().unwrap_or_default();
    let place = pubsub.place();
    let unanswered = Unanswered {
        what: "pubsub",
        at: Some(&place),
        refused_fix: "check sink.pubsub's project_id, credentials and endpoint",
        silent_fix:
            "check the endpoint (sink.pubsub.emulator_host, region or endpoint) is reachable",
    };
    listed_destinations(
        crate::sink::pubsub::probe(&pubsub, &destinations),
        &unanswered,
        report,
        "create the topics (walrelay never creates one); a record to a missing topic is \
         refused and follows [errors]",
    )
    .await;
}

/// Pulsar: the service URL answers, and a lookup of each destination's
/// topic (with its partitions) succeeds.
async fn check_pulsar(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let destinations: Vec<String> = wanted.iter().cloned().collect();
    let pulsar = config.sink.pulsar.clone().unwrap_or_default();
    let unanswered = Unanswered {
        what: "pulsar",
        at: Some(pulsar.url()),
        refused_fix: "check sink.pulsar's service_url, token and TLS settings",
        silent_fix: "check sink.pulsar.service_url is reachable",
    };
    listed_destinations(
        crate::sink::pulsar::probe(&pulsar, &destinations),
        &unanswered,
        report,
        "create the topics or allow auto-creation in the namespace; a record to a topic \
         that cannot be created is refused and follows [errors]",
    )
    .await;
}

/// SQS, SNS and Kinesis: the credentials sign, and each destination has
/// its queue (with its kind: only a FIFO queue keeps per-key order and
/// drops resent ids), topic or stream (with its status and open shards).
async fn check_aws(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let destinations: Vec<String> = wanted.iter().cloned().collect();
    let sink = &config.sink;
    let (sqs, sns, kinesis) = (
        sink.sqs.clone().unwrap_or_default(),
        sink.sns.clone().unwrap_or_default(),
        sink.kinesis.clone().unwrap_or_default(),
    );
    let (rows, probing): (
        AwsRows<'_>,
        std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>>,
    ) = match sink.kind {
        SinkKind::Sqs => (
            AwsRows {
                what: "sqs",
                endpoint: sqs.endpoint.as_deref(),
                refused_fix: "check sink.sqs's region, endpoint and credentials",
                silent_fix: "check sink.sqs.endpoint (or the region's endpoint) is reachable",
                destinations_fix: "create the queues (walrelay never creates one), or set \
                                       sink.sqs.queue_url; a record to a missing queue is refused \
                                       and follows [errors]",
            },
            Box::pin(sqs::probe(&sqs, &destinations)),
        ),
        SinkKind::Sns => (
            AwsRows {
                what: "sns",
                endpoint: sns.endpoint.as_deref(),
                refused_fix: "check sink.sns's region, endpoint and credentials",
                silent_fix: "check sink.sns.endpoint (or the region's endpoint) is reachable",
                destinations_fix: "create the topics (walrelay never creates one), or fix \
                                       sink.sns.topic_arn / topic_arn_prefix; a record to a \
                                       missing topic is refused and follows [errors]",
            },
            Box::pin(sns::probe(&sns, &destinations)),
        ),
        _ => (
            AwsRows {
                what: "kinesis",
                endpoint: kinesis.endpoint.as_deref(),
                refused_fix: "check sink.kinesis's region, endpoint and credentials",
                silent_fix: "check sink.kinesis.endpoint (or the region's endpoint) is reachable",
                destinations_fix: "create the streams (walrelay never creates one); a record \
                                       to a missing stream is refused and follows [errors]",
            },
            Box::pin(kinesis::probe(&kinesis, &destinations)),
        ),
    };
    let unanswered = Unanswered {
        what: rows.what,
        at: rows.endpoint,
        refused_fix: rows.refused_fix,
        silent_fix: rows.silent_fix,
    };
    listed_destinations(probing, &unanswered, report, rows.destinations_fix).await;
}

/// The connection row from `probing` (where the broker is, or why it did
/// not answer), then the destinations row from what it found of each.
async fn listed_destinations(
    probing: impl std::future::Future<
        Output = Result<(String, Vec<(String, Result<String, String>)>), String>,
    >,
    unanswered: &Unanswered<'_>,
    report: &mut CheckReport,
    destinations_fix: &str,
) {
    let Some((about, found)) = probe(probing, unanswered, report).await else {
        return;
    };
    report.pass(BROKER_CONNECTION, about);
    aws_destinations(&found, report, destinations_fix);
}

/// The destinations row of a broker whose probe lists each destination's
/// answer (AWS, Pub/Sub, Pulsar).
fn aws_destinations(
    found: &[(String, Result<String, String>)],
    report: &mut CheckReport,
    fix: &str,
) {
    let failed: Vec<String> = found
        .iter()
        .filter_map(|(d, q)| q.as_ref().err().map(|e| format!("{d}: {e}")))
        .collect();
    let ok: Vec<String> = found
        .iter()
        .filter_map(|(d, q)| q.as_ref().ok().map(|k| format!("{d} → {k}")))
        .collect();
    if !failed.is_empty() {
        report.fail(BROKER_DESTINATIONS, failed.join(", "), fix);
    } else if ok.is_empty() {
        report.pass(BROKER_DESTINATIONS, "no route values in the outbox yet");
    } else {
        report.pass(BROKER_DESTINATIONS, ok.join(", "));
    }
}

/// The names of the destinations a probe found missing.
fn missing(found: &[(String, bool)]) -> Vec<&str> {
    found
        .iter()
        .filter(|(_, exists)| !exists)
        .map(|(name, _)| name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::CheckStatus;

    const UNANSWERED: Unanswered<'static> = Unanswered {
        what: "nats",
        at: Some("nats://127.0.0.1:4222"),
        refused_fix: "check the credentials",
        silent_fix: "check that the server runs",
    };

    #[tokio::test]
    async fn an_answer_adds_no_row() {
        let mut report = CheckReport::default();
        let answer = probe(async { Ok::<_, String>(7) }, &UNANSWERED, &mut report).await;
        assert_eq!(answer, Some(7));
        assert!(report.rows.is_empty());
    }

    #[tokio::test]
    async fn a_refusal_fails_the_connection_and_skips_the_destinations() {
        let mut report = CheckReport::default();
        let refusal = async { Err::<u8, _>("authorization violation".to_owned()) };
        assert_eq!(probe(refusal, &UNANSWERED, &mut report).await, None);
        let connection = report.row(BROKER_CONNECTION).unwrap();
        assert_eq!(connection.status, CheckStatus::Fail);
        assert_eq!(connection.detail, "authorization violation");
        assert_eq!(connection.fix.as_deref(), Some("check the credentials"));
        let destinations = report.row(BROKER_DESTINATIONS).unwrap();
        assert_eq!(destinations.status, CheckStatus::Skip);
        assert_eq!(destinations.detail, "not checked: nats unreachable");
    }

    #[tokio::test(start_paused = true)]
    async fn silence_fails_the_connection_naming_the_address() {
        let mut report = CheckReport::default();
        let silence = std::future::pending::<Result<u8, String>>();
        assert_eq!(probe(silence, &UNANSWERED, &mut report).await, None);
        let connection = report.row(BROKER_CONNECTION).unwrap();
        assert_eq!(connection.status, CheckStatus::Fail);
        assert_eq!(
            connection.detail,
            format!("no answer from nats://127.0.0.1:4222 within {KAFKA_TIMEOUT:?}")
        );
        assert_eq!(
            connection.fix.as_deref(),
            Some("check that the server runs")
        );
        assert_eq!(
            report.row(BROKER_DESTINATIONS).unwrap().status,
            CheckStatus::Skip
        );
    }
}
