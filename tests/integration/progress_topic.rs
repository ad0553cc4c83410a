//! The exactly-once progress topic against the real broker: created
//! compacted when missing, found again without being recreated, inspected
//! read-only, and a topic with the default (delete) policy refused.

use crate::common::{create_topic_on, kafka_bootstrap, unique_name};

use rdkafka::config::ClientConfig;
use walrelay::sink::config::TransactionsConfig;
use walrelay::sink::progress_topic::{ensure, inspect, ProgressTopicError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_topic_is_created_compacted_and_a_delete_topic_is_refused() {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", kafka_bootstrap());
    let topic = unique_name("progress");
    assert_eq!(
        inspect(&cc, &topic).await.unwrap(),
        None,
        "inspect must not create it"
    );
    assert_eq!(inspect(&cc, &topic).await.unwrap(), None);
    let t = TransactionsConfig {
        progress_topic: topic.clone(),
        progress_topic_partitions: 2,
        ..TransactionsConfig::default()
    };
    let facts = ensure(&cc, &t).await.unwrap();
    assert!(facts.created && facts.compacted(), "{facts:?}");
    assert_eq!(facts.partitions, 2);
    assert!(facts.replication_factor >= 1, "{facts:?}");
    let again = ensure(&cc, &t).await.unwrap();
    assert!(!again.created, "{again:?}");
    let seen = inspect(&cc, &topic).await.unwrap().expect("exists now");
    assert_eq!(seen.cleanup_policy, "compact");

    // A topic made with the broker's default policy (delete) is refused.
    let plain = unique_name("progress-plain");
    create_topic_on(&kafka_bootstrap(), &plain, 1).await;
    let t = TransactionsConfig {
        progress_topic: plain.clone(),
        ..TransactionsConfig::default()
    };
    let err = ensure(&cc, &t).await.unwrap_err();
    assert!(
        matches!(&err, ProgressTopicError::NotCompacted { topic, .. } if *topic == plain),
        "{err:?}"
    );
    assert!(err.to_string().contains(&plain), "{err}");
}
