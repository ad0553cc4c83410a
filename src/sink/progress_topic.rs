//! The progress topic of exactly-once mode: created if missing (with
//! `kafka.transactions`' partitions and replication factor and
//! `cleanup.policy=compact`), and checked to be compacted, since only
//! compaction keeps the last progress record of each pipeline forever.
//!
//! Owns two admin conversations: [`ensure`] (at start: create, tolerate a
//! concurrent creation, then refuse a topic that is not compacted) and
//! [`inspect`] (read-only, for `walrelay check`: it never creates the topic
//! and never calls `init_transactions`, which would fence a running
//! instance). It never produces or reads records, and never alters an
//! existing topic's configuration: a topic that is wrong is named with the
//! fix, for an operator to apply. Every request is bounded by a timeout.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::sink::config::TransactionsConfig;

/// Bound on one admin or metadata request.
pub(crate) const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The topic setting that must contain `compact`.
const CLEANUP_POLICY: &str = "cleanup.policy";

/// What the brokers say about the progress topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicFacts {
    /// The topic's name.
    pub(crate) topic: String,
    /// Its partition count.
    pub partitions: usize,
    /// The replica count of its first partition.
    pub replication_factor: usize,
    /// Its `cleanup.policy` (`compact`, `delete`, `compact,delete`).
    pub cleanup_policy: String,
    /// Whether walrelay created it in this call ([`ensure`] only).
    pub created: bool,
}

impl TopicFacts {
    /// Whether `cleanup.policy` includes `compact`.
    pub fn compacted(&self) -> bool {
        is_compacted(&self.cleanup_policy)
    }
}

/// Whether a `cleanup.policy` value includes `compact` (`compact` or
/// `compact,delete`).
pub(crate) fn is_compacted(policy: &str) -> bool {
    policy
        .split(',')
        .any(|p| p.trim().eq_ignore_ascii_case("compact"))
}

/// Errors of the progress topic's admin requests.
#[derive(Debug, thiserror::Error)]
pub enum ProgressTopicError {
    /// The admin client could not be created from the producer's settings.
    #[error("cannot create a kafka admin client for the progress topic")]
    Client(#[source] KafkaError),
    /// A request did not finish within its bound.
    #[error("{what} of progress topic {topic} did not answer within {timeout:?}")]
    Timeout {
        /// The request.
        what: &'static str,
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
        /// The bound.
        timeout: Duration,
    },
    /// A request failed as a whole.
    #[error("{what} of progress topic {topic} failed")]
    Request {
        /// The request.
        what: &'static str,
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// The broker refused the creation (not because it exists).
    #[error(
        "cannot create progress topic {topic}: {code}; create it yourself \
         (kafka-topics.sh --create --topic {topic} --config cleanup.policy=compact) or grant \
         CREATE on it"
    )]
    Create {
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
        /// The broker's answer.
        code: RDKafkaErrorCode,
    },
    /// The broker answered for the topic with an error.
    #[error("describing progress topic {topic} failed: {code}")]
    Describe {
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
        /// The broker's answer.
        code: RDKafkaErrorCode,
    },
    /// The topic exists but is not compacted: old progress records would be
    /// deleted, and a restart after retention would find no position.
    #[error(
        "progress topic {topic} has cleanup.policy={policy}, without compact: its progress \
         records would be deleted; run kafka-configs.sh --alter --entity-type topics \
         --entity-name {topic} --add-config cleanup.policy=compact, or name another topic in \
         kafka.transactions.progress_topic"
    )]
    NotCompacted {
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
        /// Its `cleanup.policy`.
        policy: String,
    },
    /// The blocking metadata request's task did not complete.
    #[error("the metadata request of progress topic {topic} did not complete")]
    Task {
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The topic vanished between creation and description.
    #[error("progress topic {topic} is not in the cluster's metadata")]
    Missing {
        /// The progress topic's name (`kafka.transactions.progress_topic`).
        topic: String,
    },
}

/// An admin client on the producer's brokers and security settings,
/// without the producer's identity: no idempotent producer id and no
/// transactional id (it must never fence the real producer).
fn admin_client(cc: &ClientConfig) -> Result<Admin, ProgressTopicError> {
    let mut cc = cc.clone();
    cc.remove("transactional.id");
    cc.remove("transaction.timeout.ms");
    cc.set("enable.idempotence", "false");
    cc.create()
        .map(Arc::new)
        .map_err(ProgressTopicError::Client)
}

/// Shared so that the blocking metadata call can hold it on another thread.
type Admin = Arc<AdminClient<DefaultClientContext>>;

/// Dropping an admin client joins librdkafka's threads: not on a runtime
/// thread.
fn release(admin: Admin) {
    tokio::task::spawn_blocking(move || drop(admin));
}

/// Creates the progress topic if missing (`t.progress_topic_partitions`,
/// `t.progress_topic_replication_factor`, `cleanup.policy=compact`; a
/// concurrent creation is fine), then refuses it unless its
/// `cleanup.policy` includes `compact`. `cc` is the producer's
/// configuration.
pub async fn ensure(
    cc: &ClientConfig,
    t: &TransactionsConfig,
) -> Result<TopicFacts, ProgressTopicError> {
    let admin = admin_client(cc)?;
    let result = ensure_with(&admin, t).await;
    release(admin);
    result
}

/// Pause between metadata requests while a topic just created is not yet
/// in the broker's metadata.
const METADATA_RETRY: Duration = Duration::from_millis(100);

async fn ensure_with(
    admin: &Admin,
    t: &TransactionsConfig,
) -> Result<TopicFacts, ProgressTopicError> {
    let topic = t.progress_topic.as_str();
    let new = NewTopic::new(
        topic,
        t.progress_topic_partitions,
        // -1: the broker's default.replication.factor (KIP-464).
        TopicReplication::Fixed(t.progress_topic_replication_factor),
    )
    .set(CLEANUP_POLICY, "compact");
    let opts = AdminOptions::new()
        .request_timeout(Some(ADMIN_TIMEOUT))
        .operation_timeout(Some(ADMIN_TIMEOUT));
    let answer = tokio::time::timeout(
        ADMIN_TIMEOUT * 2 + Duration::from_secs(1),
        admin.create_topics([&new], &opts),
    )
    .await
    .map_err(|_| ProgressTopicError::Timeout {
        what: "creation",
        topic: topic.to_owned(),
        timeout: ADMIN_TIMEOUT * 2,
    })?
    .map_err(|source| ProgressTopicError::Request {
        what: "creation",
        topic: topic.to_owned(),
        source,
    })?;
    let created = match answer.into_iter().next() {
        Some(Ok(_)) => true,
        // Already there, or created by a racing instance.
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => false,
        Some(Err((_, code))) => {
            return Err(ProgressTopicError::Create {
                topic: topic.to_owned(),
                code,
            })
        }
        None => false,
    };
    // CreateTopics answers once the controller made the topic; the broker's
    // metadata cache learns of it a moment later (KRaft propagates it
    // asynchronously), so a describe right after may not see it yet.
    let deadline = tokio::time::Instant::now() + ADMIN_TIMEOUT;
    let mut facts = loop {
        match describe(admin, topic).await? {
            Some(facts) => break facts,
            None if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(METADATA_RETRY).await;
            }
            None => {
                return Err(ProgressTopicError::Missing {
                    topic: topic.to_owned(),
                })
            }
        }
    };
    facts.created = created;
    if !facts.compacted() {
        return Err(ProgressTopicError::NotCompacted {
            topic: facts.topic,
            policy: facts.cleanup_policy,
        });
    }
    Ok(facts)
}

/// The progress topic as the brokers describe it, or `None` when it does
/// not exist. Read-only: never creates it, never touches transactions.
pub async fn inspect(
    cc: &ClientConfig,
    topic: &str,
) -> Result<Option<TopicFacts>, ProgressTopicError> {
    let admin = admin_client(cc)?;
    let result = describe(&admin, topic).await;
    release(admin);
    result
}

/// Partitions and replicas from the metadata, `cleanup.policy` from the
/// topic's configuration; `None` when the topic does not exist.
async fn describe(admin: &Admin, topic: &str) -> Result<Option<TopicFacts>, ProgressTopicError> {
    // The metadata of every topic: asking for one topic by name lets a
    // producer-type client auto-create it on brokers that allow it.
    let probe = Arc::clone(admin);
    let name = topic.to_owned();
    // librdkafka's metadata call blocks its thread until the timeout.
    let metadata = tokio::task::spawn_blocking(move || {
        probe.inner().fetch_metadata(None, ADMIN_TIMEOUT).map(|md| {
            md.topics().iter().find(|m| m.name() == name).map(|m| {
                (
                    m.error().map(RDKafkaErrorCode::from),
                    m.partitions().len(),
                    m.partitions().first().map_or(0, |p| p.replicas().len()),
                )
            })
        })
    })
    .await
    .map_err(|source| ProgressTopicError::Task {
        topic: topic.to_owned(),
        source,
    })?
    .map_err(|source| ProgressTopicError::Request {
        what: "metadata request",
        topic: topic.to_owned(),
        source,
    })?;
    let (partitions, replication_factor) = match metadata {
        None => return Ok(None),
        Some((
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic),
            _,
            _,
        )) => return Ok(None),
        Some((Some(code), _, _)) => {
            return Err(ProgressTopicError::Describe {
                topic: topic.to_owned(),
                code,
            })
        }
        Some((None, partitions, replicas)) => (partitions, replicas),
    };
    let opts = AdminOptions::new().request_timeout(Some(ADMIN_TIMEOUT));
    let resource = ResourceSpecifier::Topic(topic);
    let answer = tokio::time::timeout(
        ADMIN_TIMEOUT + Duration::from_secs(1),
        admin.describe_configs([&resource], &opts),
    )
    .await
    .map_err(|_| ProgressTopicError::Timeout {
        what: "configuration",
        topic: topic.to_owned(),
        timeout: ADMIN_TIMEOUT,
    })?
    .map_err(|source| ProgressTopicError::Request {
        what: "configuration",
        topic: topic.to_owned(),
        source,
    })?;
    let cleanup_policy = match answer.into_iter().next() {
        Some(Ok(config)) => config
            .get(CLEANUP_POLICY)
            .and_then(|e| e.value.clone())
            // Kafka's default when a broker does not report it.
            .unwrap_or_else(|| "delete".to_owned()),
        Some(Err(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic)) => {
            return Ok(None)
        }
        Some(Err(code)) => {
            return Err(ProgressTopicError::Describe {
                topic: topic.to_owned(),
                code,
            })
        }
        None => "delete".to_owned(),
    };
    Ok(Some(TopicFacts {
        topic: topic.to_owned(),
        partitions,
        replication_factor,
        cleanup_policy,
        created: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_is_read_from_the_policy_list() {
        assert!(is_compacted("compact"));
        assert!(is_compacted("compact,delete"));
        assert!(is_compacted("delete, compact"));
        assert!(!is_compacted("delete"));
        assert!(!is_compacted(""));
    }

    #[test]
    fn not_compacted_names_the_topic_and_the_fix() {
        let e = ProgressTopicError::NotCompacted {
            topic: "walrelay-progress".into(),
            policy: "delete".into(),
        };
        let text = e.to_string();
        assert!(
            text.contains("walrelay-progress")
                && text.contains("cleanup.policy=compact")
                && text.contains("kafka.transactions.progress_topic"),
            "{text}"
        );
    }

    /// An unreachable broker costs a bounded error, never a hang or a panic.
    #[tokio::test]
    async fn unreachable_brokers_are_an_error() {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", "127.0.0.1:1")
            .set("socket.connection.setup.timeout.ms", "1000");
        let started = std::time::Instant::now();
        let err = inspect(&cc, "walrelay-progress").await.unwrap_err();
        assert!(matches!(err, ProgressTopicError::Request { .. }), "{err:?}");
        assert!(
            started.elapsed() < ADMIN_TIMEOUT * 2,
            "{:?}",
            started.elapsed()
        );
    }
}
