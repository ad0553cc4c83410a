//! The three storage topics, created as Connect creates them when missing:
//! compacted, with the configured partitions and replication factor (the
//! config topic always with one partition); an existing config topic with
//! more than one partition is refused, as Connect refuses it.
//!
//! Owns the admin requests; it never deletes or alters a topic.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::ClientConfig;
use tracing::info;

use super::worker::{DistributedConfig, StorageTopic};

/// How long the admin requests may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// An error creating or checking a storage topic.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TopicError {
    /// The admin client failed.
    #[error("creating storage topic {topic}: {message}")]
    Create {
        /// The topic.
        topic: String,
        /// librdkafka's or the broker's message.
        message: String,
    },
    /// The config topic has more than one partition.
    #[error(
        "config.storage.topic {topic} has {partitions} partitions; Connect and walrelay require \
         exactly one (records are read in one order)"
    )]
    ConfigPartitions {
        /// The topic.
        topic: String,
        /// Its partitions.
        partitions: usize,
    },
}

/// Refuses a config topic of more than one partition.
pub(crate) fn check_config_partitions(topic: &str, partitions: i32) -> Result<(), TopicError> {
    if partitions > 1 {
        return Err(TopicError::ConfigPartitions {
            topic: topic.to_owned(),
            partitions: partitions as usize,
        });
    }
    Ok(())
}

/// Creates the storage topics that do not exist yet (the config topic's
/// partitions are checked where it is read: [`check_config_partitions`]).
pub(crate) async fn ensure(
    clients: &ClientConfig,
    dist: &DistributedConfig,
) -> Result<(), TopicError> {
    let admin: AdminClient<DefaultClientContext> =
        clients.create().map_err(|e| TopicError::Create {
            topic: dist.config_topic.name.clone(),
            message: e.to_string(),
        })?;
    let compact = [("cleanup.policy", "compact")];
    let new: Vec<NewTopic<'_>> = [&dist.config_topic, &dist.offset_topic, &dist.status_topic]
        .into_iter()
        .map(|t: &StorageTopic| {
            let mut n = NewTopic::new(
                &t.name,
                t.partitions,
                TopicReplication::Fixed(t.replication_factor),
            );
            for (k, v) in compact {
                n = n.set(k, v);
            }
            n
        })
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let results = admin
        .create_topics(new.iter(), &opts)
        .await
        .map_err(|e| TopicError::Create {
            topic: dist.config_topic.name.clone(),
            message: e.to_string(),
        })?;
    for r in results {
        match r {
            Ok(topic) => info!(topic = %topic, "created storage topic"),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                return Err(TopicError::Create {
                    topic,
                    message: code.to_string(),
                })
            }
        }
    }
    Ok(())
}
