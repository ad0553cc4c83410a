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
use crate::sink::config::SinkKind;
use crate::sink::{nats, rabbitmq, redis};

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
        SinkKind::Http => check_http(config, report).await,
    }
}

async fn check_nats(config: &Config, wanted: &BTreeSet<String>, report: &mut CheckReport) {
    let Some(cfg) = &config.sink.nats else {
        return;
    };
    let probed = tokio::time::timeout(KAFKA_TIMEOUT, nats::probe(cfg)).await;
    let (about, context) = match probed {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            report.fail(
                BROKER_CONNECTION,
                e,
                "check sink.nats.url and its credentials",
            );
            report.skip(BROKER_DESTINATIONS, "nats unreachable");
            return;
        }
        Err(_) => {
            report.fail(
                BROKER_CONNECTION,
                format!("no answer from {} within {KAFKA_TIMEOUT:?}", cfg.url),
                "check sink.nats.url and that nats-server runs",
            );
            report.skip(BROKER_DESTINATIONS, "nats unreachable");
            return;
        }
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
    let probed = tokio::time::timeout(KAFKA_TIMEOUT, redis::probe(cfg, &keys)).await;
    let (about, types) = match probed {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            report.fail(
                BROKER_CONNECTION,
                e,
                "check sink.redis.address and its credentials",
            );
            report.skip(BROKER_DESTINATIONS, "redis unreachable");
            return;
        }
        Err(_) => {
            report.fail(
                BROKER_CONNECTION,
                format!("no answer from {} within {KAFKA_TIMEOUT:?}", cfg.address),
                "check sink.redis.address and that redis-server runs",
            );
            report.skip(BROKER_DESTINATIONS, "redis unreachable");
            return;
        }
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
    let probed = tokio::time::timeout(KAFKA_TIMEOUT, rabbitmq::probe(cfg, &destinations)).await;
    let (about, exchanges) = match probed {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            report.fail(
                BROKER_CONNECTION,
                e,
                "check sink.rabbitmq's address and credentials",
            );
            report.skip(BROKER_DESTINATIONS, "rabbitmq unreachable");
            return;
        }
        Err(_) => {
            report.fail(
                BROKER_CONNECTION,
                format!("no answer within {KAFKA_TIMEOUT:?}"),
                "check sink.rabbitmq's address and that rabbitmq-server runs",
            );
            report.skip(BROKER_DESTINATIONS, "rabbitmq unreachable");
            return;
        }
    };
    report.pass(BROKER_CONNECTION, about);
    let missing: Vec<&str> = exchanges
        .iter()
        .filter(|(_, exists)| !exists)
        .map(|(name, _)| name.as_str())
        .collect();
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
