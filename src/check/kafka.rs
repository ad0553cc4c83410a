//! The Kafka rows: the brokers answer a metadata request (with the
//! producer's own security settings), and the topics the router would
//! produce to exist or will be auto-created. Every request is bounded by
//! [`KAFKA_TIMEOUT`]. It must never create a topic, produce a record or
//! call `init_transactions`: it asks for metadata and one broker's
//! configuration, and nothing more.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use super::columns::{RouteValues, ROUTE_VALUE_LIMIT};
use super::report::{CheckReport, KAFKA_CONNECTION, KAFKA_TOPICS};
use super::step::{bounded, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;

/// Bound on each Kafka request (metadata, broker configuration).
pub const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);
/// The broker setting that lets a producer create topics by writing to them.
const AUTO_CREATE_TOPICS: &str = "auto.create.topics.enable";

/// What Kafka answered.
pub(super) struct KafkaOutcome {
    /// Brokers and topics, or why not.
    metadata: Result<KafkaMetadata, (String, String)>,
    /// `auto.create.topics.enable` of the first broker, or why it is unknown.
    auto_create: Result<bool, String>,
}

struct KafkaMetadata {
    brokers: Vec<String>,
    topics: BTreeSet<String>,
}

impl KafkaOutcome {
    /// Whether the brokers answered.
    pub(super) fn reachable(&self) -> bool {
        self.metadata.is_ok()
    }

    /// The `kafka connection` row.
    pub(super) fn report_connection(&self, report: &mut CheckReport) {
        match &self.metadata {
            Ok(md) => report.pass(
                KAFKA_CONNECTION,
                format!(
                    "{} broker(s): {}; {} topics visible",
                    md.brokers.len(),
                    md.brokers.join(", "),
                    md.topics.len()
                ),
            ),
            Err((detail, fix)) => report.fail(KAFKA_CONNECTION, detail.clone(), fix.clone()),
        }
    }
}

/// The client configuration of the producer's brokers and security
/// settings.
pub(super) fn kafka_client_config(config: &Config) -> ClientConfig {
    let kafka = &config.kafka;
    let mut cc = ClientConfig::new();
    for (k, v) in kafka.properties() {
        cc.set(k, v);
    }
    cc.set("bootstrap.servers", &kafka.bootstrap_servers);
    cc
}

/// Asks the brokers for metadata and the first broker for
/// [`AUTO_CREATE_TOPICS`].
pub(super) async fn check_kafka(config: &Config) -> KafkaOutcome {
    let cc = kafka_client_config(config);
    let admin: AdminClient<DefaultClientContext> = match cc.create() {
        Ok(a) => a,
        Err(e) => {
            return KafkaOutcome {
                metadata: Err((
                    format!("cannot create a kafka client: {e}"),
                    "fix the librdkafka property it names in kafka.producer".to_owned(),
                )),
                auto_create: Err("kafka client not created".to_owned()),
            }
        }
    };
    let admin = Arc::new(admin);
    let (brokers, topics) = match fetch_metadata(config, Arc::clone(&admin)).await {
        Ok(v) => v,
        Err(why) => {
            release(admin);
            return KafkaOutcome {
                metadata: Err(why),
                auto_create: Err("kafka unreachable".to_owned()),
            };
        }
    };
    let auto_create = match brokers.first() {
        None => Err("the cluster listed no broker".to_owned()),
        Some((id, _)) => auto_create(&admin, *id).await,
    };
    release(admin);
    KafkaOutcome {
        metadata: Ok(KafkaMetadata {
            brokers: brokers.into_iter().map(|(_, s)| s).collect(),
            topics,
        }),
        auto_create,
    }
}

/// The brokers (id, and as shown) and the topics; or the failed row's
/// detail and fix.
async fn fetch_metadata(
    config: &Config,
    probe: Arc<AdminClient<DefaultClientContext>>,
) -> Result<(Vec<(i32, String)>, BTreeSet<String>), (String, String)> {
    let kafka = &config.kafka;
    let fix_reach = || {
        format!(
            "check kafka.bootstrap_servers ({}) and the security settings in kafka.producer / kafka.secrets \
             (security.protocol, sasl.*, ssl.*); the brokers' advertised listeners must be reachable from this host",
            kafka.bootstrap_servers
        )
    };
    // librdkafka's metadata call blocks its thread until the timeout.
    let md = tokio::task::spawn_blocking(move || {
        probe.inner().fetch_metadata(None, KAFKA_TIMEOUT).map(|md| {
            let brokers: Vec<(i32, String)> = md
                .brokers()
                .iter()
                .map(|b| (b.id(), format!("{}:{} (id {})", b.host(), b.port(), b.id())))
                .collect();
            let topics = md.topics().iter().map(|t| t.name().to_owned()).collect();
            (brokers, topics)
        })
    })
    .await;
    match md {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((
            format!(
                "no metadata from {} within {KAFKA_TIMEOUT:?}: {}",
                kafka.bootstrap_servers, e
            ),
            fix_reach(),
        )),
        Err(e) => Err((format!("metadata request failed: {e}"), fix_reach())),
    }
}

/// [`AUTO_CREATE_TOPICS`] of broker `id`, or why it is unknown.
async fn auto_create(admin: &AdminClient<DefaultClientContext>, id: i32) -> Result<bool, String> {
    let opts = AdminOptions::new().request_timeout(Some(KAFKA_TIMEOUT));
    let resource = ResourceSpecifier::Broker(id);
    let fut = async {
        admin
            .describe_configs([&resource], &opts)
            .await
            .map_err(|source| CheckError::Kafka {
                context: format!("cannot describe broker {id}"),
                source,
            })
    };
    match bounded(
        "describe configs",
        KAFKA_TIMEOUT + Duration::from_secs(1),
        fut,
    )
    .await
    {
        Ok(results) => match results.into_iter().next() {
            Some(Ok(resource)) => match resource.get(AUTO_CREATE_TOPICS) {
                Some(entry) => match entry.value.as_deref() {
                    Some("true") => Ok(true),
                    Some("false") => Ok(false),
                    other => Err(format!("{AUTO_CREATE_TOPICS} = {other:?}")),
                },
                None => Err(format!("broker {id} did not report {AUTO_CREATE_TOPICS}")),
            },
            Some(Err(code)) => Err(format!("broker {id}: {code}")),
            None => Err(format!("broker {id} returned no configuration")),
        },
        // librdkafka's error repeats its code as the source: show it once.
        Err(CheckError::Kafka { context, source }) => Err(format!("{context}: {source}")),
        Err(e) => Err(DisplayChain(&e).to_string()),
    }
}

/// Drops the client off the runtime: librdkafka's destroy joins its threads.
fn release(admin: Arc<AdminClient<DefaultClientContext>>) {
    tokio::task::spawn_blocking(move || drop(admin));
}

/// The `kafka topics` row: the topics the route values (and heartbeats)
/// name exist, or the brokers create them.
pub(super) fn check_topics(
    config: &Config,
    route_values: RouteValues,
    kafka: &KafkaOutcome,
    report: &mut CheckReport,
) {
    let Ok(md) = &kafka.metadata else {
        report.skip(KAFKA_TOPICS, "kafka unreachable");
        return;
    };
    let rewrite = match config.router.compile() {
        Ok((rewrite, _)) => rewrite,
        Err(e) => {
            report.fail(
                KAFKA_TOPICS,
                format!("the routing configuration is invalid: {}", DisplayChain(&e)),
                "fix router.route_topic_regex / router.route_topic_replacement",
            );
            return;
        }
    };
    let (mut wanted, source) = match &route_values {
        Some(Ok(values)) => (
            values.iter().map(|v| rewrite.apply(v)).collect(),
            values_source(config, values),
        ),
        Some(Err(e)) => (BTreeSet::new(), format!("route values unreadable ({e})")),
        None => (BTreeSet::new(), "route values not checked".to_owned()),
    };
    if config.heartbeat.interval_ms > 0 {
        wanted.insert(config.heartbeat.topic(&config.debezium.topic_prefix));
    }
    let example = rewrite.apply("<aggregatetype>");
    topics_row(report, &kafka.auto_create, md, &wanted, &source, &example);
}

/// Where the topic names come from: how many values of which route
/// columns.
fn values_source(config: &Config, values: &[String]) -> String {
    // Each table's own route column, where one sets it.
    let mut fields = vec![config.router.route_by_field.as_str()];
    for t in &config.outbox.tables {
        if let Some(f) = t.columns.route_by_field.as_deref() {
            if !fields.contains(&f) {
                fields.push(f);
            }
        }
    }
    format!(
        "{} distinct {} value(s) in the outbox{}",
        values.len(),
        fields.join("/"),
        if values.len() as i64 >= ROUTE_VALUE_LIMIT {
            " (first ones only)"
        } else {
            ""
        }
    )
}

/// Judges the `wanted` topics against the brokers' (`md`) and whether
/// they auto-create the missing ones; `example` is a topic name to show
/// when no route value was read.
fn topics_row(
    report: &mut CheckReport,
    auto_create: &Result<bool, String>,
    md: &KafkaMetadata,
    wanted: &BTreeSet<String>,
    source: &str,
    example: &str,
) {
    let missing: Vec<&String> = wanted.iter().filter(|t| !md.topics.contains(*t)).collect();
    let existing = wanted.len() - missing.len();
    let create_fix = |topics: &str| {
        format!(
            "create them before events arrive (kafka-topics.sh --create --topic {topics} ...), or set {AUTO_CREATE_TOPICS}=true on the brokers"
        )
    };
    match (auto_create, missing.is_empty(), wanted.is_empty()) {
        (_, true, false) => report.pass(
            KAFKA_TOPICS,
            format!("{source}: all {existing} topic(s) exist"),
        ),
        (Ok(true), _, true) => report.pass(
            KAFKA_TOPICS,
            format!("{source}; topics are named like {example}; the broker auto-creates them ({AUTO_CREATE_TOPICS}=true)"),
        ),
        (Ok(true), false, false) => report.pass(
            KAFKA_TOPICS,
            format!(
                "{source}: {existing} topic(s) exist, {} will be auto-created ({AUTO_CREATE_TOPICS}=true): {}",
                missing.len(),
                list(&missing)
            ),
        ),
        (Ok(false), _, true) => report.warn(
            KAFKA_TOPICS,
            format!("{source}; topics are named like {example} and {AUTO_CREATE_TOPICS}=false"),
            create_fix(example),
        ),
        (Ok(false), false, false) => report.fail(
            KAFKA_TOPICS,
            format!(
                "{source}: missing topic(s) {} and {AUTO_CREATE_TOPICS}=false, so deliveries to them fail",
                list(&missing)
            ),
            create_fix(&list(&missing)),
        ),
        (Err(why), _, true) => report.warn(
            KAFKA_TOPICS,
            format!("{source}; topics are named like {example}; cannot tell whether the broker auto-creates them: {why}"),
            create_fix(example),
        ),
        (Err(why), false, false) => report.warn(
            KAFKA_TOPICS,
            format!(
                "{source}: missing topic(s) {}; cannot tell whether the broker auto-creates them: {why}",
                list(&missing)
            ),
            create_fix(&list(&missing)),
        ),
    }
}

/// The first topics of `topics`, and how many more.
fn list(topics: &[&String]) -> String {
    const SHOWN: usize = 10;
    let mut s = topics
        .iter()
        .take(SHOWN)
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if topics.len() > SHOWN {
        s.push_str(&format!(" and {} more", topics.len() - SHOWN));
    }
    s
}
