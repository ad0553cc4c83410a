//! The exactly-once rows (with `kafka.exactly_once`): the mode with its
//! transactional id and pipeline, and the progress topic (compacted, or
//! missing and created at start). It must never call `init_transactions`
//! (that would fence a running instance) nor create or alter the progress
//! topic: the topic is only described.

use super::kafka::kafka_client_config;
use super::report::{CheckReport, EXACTLY_ONCE, PROGRESS_TOPIC};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::human::human_bytes;
use crate::sink::progress_topic::{self, ProgressTopicError, TopicFacts};

/// The exactly-once rows; the progress topic is described only when Kafka
/// is `reachable`.
pub(super) async fn check_exactly_once(config: &Config, reachable: bool, report: &mut CheckReport) {
    let progress = if reachable {
        Some(
            progress_topic::inspect(
                &kafka_client_config(config),
                &config.kafka.transactions.progress_topic,
            )
            .await,
        )
    } else {
        None
    };
    exactly_once_rows(config, progress, report);
}

/// The exactly-once rows: the mode, and the progress topic as
/// [`progress_topic::inspect`] found it (`None`: Kafka unreachable).
fn exactly_once_rows(
    config: &Config,
    progress: Option<Result<Option<TopicFacts>, ProgressTopicError>>,
    report: &mut CheckReport,
) {
    let t = &config.kafka.transactions;
    let slot = &config.replication.slot;
    report.pass(
        EXACTLY_ONCE,
        format!(
            "on: transactional id {}, pipeline {}; a Kafka transaction commits at {} events, {} \
             or {} ms, timeout {} ms",
            t.transactional_id_for(slot),
            t.pipeline_name(slot),
            t.max_events,
            human_bytes(t.max_bytes),
            t.interval_ms,
            t.timeout_ms
        ),
    );
    progress_topic_row(config, progress, report);
}

/// The progress topic as [`progress_topic::inspect`] found it (`None`:
/// Kafka unreachable): compacted, or missing and created at start.
fn progress_topic_row(
    config: &Config,
    progress: Option<Result<Option<TopicFacts>, ProgressTopicError>>,
    report: &mut CheckReport,
) {
    let t = &config.kafka.transactions;
    let topic = &t.progress_topic;
    match progress {
        None => report.skip(PROGRESS_TOPIC, "kafka unreachable"),
        Some(Ok(None)) => {
            let rf = match t.progress_topic_replication_factor {
                -1 => "the broker's default replication factor".to_owned(),
                n => format!("replication factor {n}"),
            };
            report.pass(
                PROGRESS_TOPIC,
                format!(
                    "{topic} missing: walrelay creates it at start with {} partition(s), {rf}, \
                     cleanup.policy=compact",
                    t.progress_topic_partitions
                ),
            );
        }
        Some(Ok(Some(facts))) if facts.compacted() => report.pass(
            PROGRESS_TOPIC,
            format!(
                "{topic}: {} partition(s), replication factor {}, cleanup.policy={}",
                facts.partitions, facts.replication_factor, facts.cleanup_policy
            ),
        ),
        Some(Ok(Some(facts))) => report.fail(
            PROGRESS_TOPIC,
            format!(
                "{topic} has cleanup.policy={}, without compact: its progress records would be \
                 deleted, and walrelay refuses to start",
                facts.cleanup_policy
            ),
            format!(
                "kafka-configs.sh --alter --entity-type topics --entity-name {topic} \
                 --add-config cleanup.policy=compact, or name another topic in \
                 kafka.transactions.progress_topic"
            ),
        ),
        Some(Err(e)) => report.fail(
            PROGRESS_TOPIC,
            format!("cannot describe {topic}: {}", DisplayChain(&e)),
            format!(
                "walrelay needs DESCRIBE and DESCRIBE_CONFIGS on topic {topic} (and CREATE while \
                 it does not exist)"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::CheckStatus;

    fn exactly_once_config(extra: &str) -> Config {
        let text = format!(
            "[postgres]\nhost = \"127.0.0.1\"\nuser = \"walrelay\"\ndbname = \"app\"\n\n\
             [outbox]\ntable = \"public.outbox\"\n\n\
             [replication]\nslot = \"orders\"\n\n\
             [kafka]\nbootstrap_servers = \"127.0.0.1:9092\"\nexactly_once = true\n{extra}"
        );
        Config::from_toml(&text, std::path::Path::new("f.toml")).expect("valid config")
    }

    fn facts(policy: &str) -> TopicFacts {
        TopicFacts {
            topic: "walrelay-progress".into(),
            partitions: 1,
            replication_factor: 3,
            cleanup_policy: policy.into(),
            created: false,
        }
    }

    #[test]
    fn exactly_once_rows_name_the_id_and_the_topic_state() {
        let config = exactly_once_config("");
        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(None)), &mut r);
        let mode = r.row(EXACTLY_ONCE).expect("row");
        assert_eq!(mode.status, CheckStatus::Pass);
        assert!(
            mode.detail.contains("transactional id walrelay-orders")
                && mode.detail.contains("pipeline orders"),
            "{r}"
        );
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert_eq!(topic.status, CheckStatus::Pass, "{r}");
        assert!(
            topic
                .detail
                .contains("walrelay-progress missing: walrelay creates it at start")
                && topic
                    .detail
                    .contains("the broker's default replication factor")
                && topic.detail.contains("cleanup.policy=compact"),
            "{r}"
        );

        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(Some(facts("compact,delete")))), &mut r);
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert_eq!(topic.status, CheckStatus::Pass, "{r}");
        assert!(topic.detail.contains("replication factor 3"), "{r}");

        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(Some(facts("delete")))), &mut r);
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert_eq!(topic.status, CheckStatus::Fail, "{r}");
        assert!(!r.passed());
        let fix = topic.fix.as_deref().expect("fix");
        assert!(
            fix.contains("--entity-name walrelay-progress")
                && fix.contains("cleanup.policy=compact")
                && fix.contains("kafka.transactions.progress_topic"),
            "{fix}"
        );

        let mut r = CheckReport::default();
        exactly_once_rows(&config, None, &mut r);
        assert_eq!(
            r.row(PROGRESS_TOPIC).expect("row").status,
            CheckStatus::Skip
        );

        let config = exactly_once_config(
            "\n[kafka.transactions]\npipeline = \"shop\"\ntransactional_id = \"tx-1\"\n\
             progress_topic = \"shop-progress\"\nprogress_topic_replication_factor = 3\n",
        );
        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(None)), &mut r);
        let mode = r.row(EXACTLY_ONCE).expect("row");
        assert!(
            mode.detail.contains("transactional id tx-1") && mode.detail.contains("pipeline shop"),
            "{r}"
        );
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert!(
            topic.detail.contains("shop-progress missing")
                && topic.detail.contains("replication factor 3"),
            "{r}"
        );
    }
}
