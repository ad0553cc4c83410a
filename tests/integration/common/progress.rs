//! Exactly-once mode seen from outside: the configuration lines that turn
//! it on, and the pipeline's progress records in the compacted progress
//! topic, read as a `read_committed` consumer reads them.
//!
//! A progress record is keyed `["<pipeline>",{"walrelay":"progress"}]`
//! (JSON) and its value names the position whose Kafka transaction
//! committed: `system_id`, `timeline`, `slot`, `lsn` (commit end of the last
//! whole source transaction, `X/Y`), `events` (events of a split source
//! transaction already committed, 0 at a boundary), `commit_lsn`, `phase`.
//! Only these are read; a test asserts on what it needs of them.

use std::time::{Duration, Instant};

use serde_json::Value;
use walrelay::proto::Lsn;

use super::relay::{tail, Relay, WAIT};
use super::{read_to_end_on, unique_name, Record};

/// One progress record of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    /// Offset in the progress topic.
    pub offset: i64,
    pub system_id: Option<String>,
    pub timeline: Option<u64>,
    pub slot: String,
    pub lsn: Lsn,
    pub events: u64,
    pub commit_lsn: Option<Lsn>,
    pub phase: Option<String>,
}

/// The progress topic of one test's pipeline.
#[derive(Debug, Clone)]
pub(crate) struct ProgressTopic {
    pub bootstrap: String,
    /// `kafka.transactions.progress_topic`, unique per test.
    pub topic: String,
    /// The pipeline name (the key of its records); the slot's name unless
    /// the configuration names another.
    pub pipeline: String,
}

/// Bound on a progress record reaching a position.
const PROGRESS_WAIT: Duration = Duration::from_secs(180);

impl ProgressTopic {
    /// A fresh progress topic name for a pipeline named `pipeline` (the
    /// slot, by default) on the broker at `bootstrap`.
    pub(crate) fn new(bootstrap: &str, pipeline: &str) -> ProgressTopic {
        ProgressTopic {
            bootstrap: bootstrap.to_string(),
            topic: unique_name("progress"),
            pipeline: pipeline.to_string(),
        }
    }

    /// `config` (a test configuration whose `[kafka]` table starts with
    /// `bootstrap_servers`) in exactly-once mode with this progress topic;
    /// `transactions` are more lines of `[kafka.transactions]`.
    pub(crate) fn config(&self, config: &str, transactions: &str) -> String {
        let marker = format!("bootstrap_servers = \"{}\"\n", self.bootstrap);
        assert!(
            config.contains(&marker),
            "the configuration has no [kafka] bootstrap_servers line for {}:\n{config}",
            self.bootstrap
        );
        format!(
            "{}\n[kafka.transactions]\nprogress_topic = \"{}\"\n{transactions}\n",
            config.replacen(&marker, &format!("{marker}exactly_once = true\n"), 1),
            self.topic
        )
    }

    /// The pipeline's progress records in the topic, in offset order
    /// (compaction may have removed older ones).
    pub(crate) async fn history(&self) -> Vec<Progress> {
        let records = read_to_end_on(&self.bootstrap, &self.topic, WAIT).await;
        records
            .iter()
            .filter(|r| is_key_of(r, &self.pipeline))
            .map(|r| parse(r).unwrap_or_else(|e| panic!("progress record {r:?}: {e}")))
            .collect()
    }

    /// The last committed progress record of the pipeline, if any.
    pub(crate) async fn last(&self) -> Option<Progress> {
        self.history().await.pop()
    }

    /// Waits until the last committed progress record is at or past `lsn`
    /// (bounded; panics with the log of `relay` while it still runs).
    pub(crate) async fn wait_for(&self, lsn: Lsn, relay: &mut Relay) -> Progress {
        self.wait_until(&format!("a position at or past {lsn}"), relay, |p| {
            p.lsn >= lsn
        })
        .await
    }

    /// Waits until the last committed progress record satisfies `pred`
    /// (bounded; `what` names the wait in the panic).
    pub(crate) async fn wait_until(
        &self,
        what: &str,
        relay: &mut Relay,
        pred: impl Fn(&Progress) -> bool,
    ) -> Progress {
        let deadline = Instant::now() + PROGRESS_WAIT;
        loop {
            let last = self.last().await;
            if let Some(p) = &last {
                if pred(p) {
                    return p.clone();
                }
            }
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "progress of {} in {} shows no {what} within {PROGRESS_WAIT:?}: last {last:?}\n{}",
                self.pipeline,
                self.topic,
                tail(&relay.log(), 60)
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Committed progress never goes back: LSNs never decrease, and within
    /// one position and phase the events already committed never decrease.
    pub(crate) fn assert_monotonic(&self, history: &[Progress]) {
        for pair in history.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let back =
                b.lsn < a.lsn || (b.lsn == a.lsn && b.phase == a.phase && b.events < a.events);
            assert!(
                !back,
                "progress of {} went back in {}: {a:?} then {b:?}",
                self.pipeline, self.topic
            );
        }
    }
}

/// Whether `record` is a progress record of `pipeline`.
pub(crate) fn is_key_of(record: &Record, pipeline: &str) -> bool {
    let Some(key) = record.key.as_deref() else {
        return false;
    };
    let Ok(key) = serde_json::from_slice::<Value>(key) else {
        return false;
    };
    key == serde_json::json!([pipeline, {"walrelay": "progress"}])
}

fn parse(record: &Record) -> Result<Progress, String> {
    let value = record.value.as_deref().ok_or("a tombstone")?;
    let v: Value = serde_json::from_slice(value).map_err(|e| format!("not JSON: {e}"))?;
    let text = |name: &str| -> Option<String> {
        match v.get(name)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let lsn = |name: &str| -> Result<Option<Lsn>, String> {
        text(name)
            .map(|s| s.parse::<Lsn>().map_err(|e| format!("{name}: {e}")))
            .transpose()
    };
    Ok(Progress {
        offset: record.offset,
        system_id: text("system_id"),
        timeline: text("timeline").and_then(|t| t.parse().ok()),
        slot: text("slot").ok_or("no slot")?,
        lsn: lsn("lsn")?.ok_or("no lsn")?,
        events: text("events")
            .and_then(|n| n.parse().ok())
            .ok_or("no events count")?,
        commit_lsn: lsn("commit_lsn")?,
        phase: text("phase"),
    })
}
