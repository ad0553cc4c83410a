//! The progress topic of exactly-once mode: created when missing
//! (compacted), checked when present. (Interim version; the full one with
//! `walrelay check`'s inspection replaces it.)

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;

use crate::sink::config::TransactionsConfig;

/// Errors of the progress topic.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProgressTopicError(String);

/// Creates the progress topic if it is missing.
pub async fn ensure(cc: &ClientConfig, t: &TransactionsConfig) -> Result<(), ProgressTopicError> {
    let mut cc = cc.clone();
    cc.set("enable.idempotence", "false");
    let admin: AdminClient<DefaultClientContext> = cc
        .create()
        .map_err(|e| ProgressTopicError(format!("cannot create a kafka admin client: {e}")))?;
    let topic = NewTopic::new(
        &t.progress_topic,
        t.progress_topic_partitions,
        TopicReplication::Fixed(t.progress_topic_replication_factor),
    )
    .set("cleanup.policy", "compact");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let r = admin.create_topics([&topic], &opts).await;
    tokio::task::spawn_blocking(move || drop(admin));
    match r {
        Ok(results) => match results.into_iter().next() {
            Some(Ok(_)) | None => Ok(()),
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(()),
            Some(Err((name, code))) => {
                Err(ProgressTopicError(format!("cannot create {name}: {code}")))
            }
        },
        Err(e) => Err(ProgressTopicError(format!("cannot create the topic: {e}"))),
    }
}
