//! Exactly-once mode's progress store: where a session resumes (the last
//! committed progress record), the durable position it gives the slot
//! (the last committed Kafka transaction's), and the check that refuses a
//! slot ahead of what walrelay committed. It reads and writes no Kafka
//! record itself: the run loop ([`super`]) commits, the start reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tracing::warn;
use walrelay_proto::Lsn;

use super::super::progress::Phase;
use super::super::KafkaSink;
use super::Eos;
use crate::checkpoint::SharedTracker;
use crate::sink::config::SlotAhead;
use crate::source::{Frontier, ProgressStore, SlotVerdict};

/// The durable position of exactly-once mode: the last committed progress.
#[derive(Debug, Clone)]
pub(crate) struct EosFrontier(Arc<AtomicU64>);

impl Frontier for EosFrontier {
    fn durable(&self) -> Lsn {
        Lsn(self.0.load(Ordering::Acquire))
    }
}

/// The progress store of exactly-once mode: positions come from the
/// progress topic (read at start, then from each commit).
#[derive(Debug, Clone)]
pub(crate) struct KafkaProgress {
    pub(super) eos: Arc<Eos>,
}

impl KafkaProgress {
    /// The store of `sink`, which must be in exactly-once mode.
    pub(crate) fn of(sink: &KafkaSink) -> Option<KafkaProgress> {
        sink.eos.as_ref().map(|eos| KafkaProgress {
            eos: Arc::clone(eos),
        })
    }

    fn system_of(origin: &str) -> (&str, u32) {
        let (system, timeline) = origin.split_once('/').unwrap_or((origin, "0"));
        (system, timeline.parse().unwrap_or(0))
    }
}

impl ProgressStore for KafkaProgress {
    type Frontier = EosFrontier;

    fn resume_after(&self, origin: &str) -> Option<Lsn> {
        let (system, _) = Self::system_of(origin);
        self.eos
            .committed()
            .filter(|p| p.system_id == system && p.phase == Phase::Stream)
            .map(|p| p.resume_lsn())
    }

    fn begin_session(&mut self, _origin: &str, tracker: &SharedTracker) -> EosFrontier {
        // Nothing before the session's start is produced again (the slot
        // or the progress is there), so it is durable already.
        self.eos
            .durable
            .fetch_max(tracker.confirmed().0, Ordering::AcqRel);
        EosFrontier(Arc::clone(&self.eos.durable))
    }

    /// Checks the slot (its confirmed position, or `None` when it does not
    /// exist) against the last committed progress on `origin`; the error
    /// names both positions and the way out.
    fn verify(&self, origin: &str, slot_at: Option<Lsn>) -> Result<SlotVerdict, String> {
        let (system, timeline) = Self::system_of(origin);
        *self.eos.origin.lock().expect("origin lock") = (system.to_owned(), timeline);
        let Some(p) = self.eos.committed() else {
            return Ok(SlotVerdict::Proceed);
        };
        let pipeline = &self.eos.pipeline;
        let topic = &self.eos.config.progress_topic;
        if p.system_id != system {
            return Err(format!(
                "the progress of pipeline {pipeline} in {topic} is from database system {} \
                 but this server is system {system}: it is another database; use another \
                 kafka.transactions.pipeline (or progress topic) for it",
                p.system_id
            ));
        }
        if p.phase == Phase::Snapshot {
            return Ok(SlotVerdict::RedoSnapshot);
        }
        let ours = p.resume_lsn();
        match slot_at {
            None => Err(format!(
                "slot {} does not exist, but the progress of pipeline {pipeline} in {topic} \
                 says walrelay streamed from it up to {ours}: a new slot would miss the events \
                 in between. Recreate nothing silently: to start this pipeline over, delete its \
                 progress (produce a tombstone for its key) or use another \
                 kafka.transactions.pipeline",
                self.eos.slot
            )),
            Some(slot) if slot > ours => match self.eos.config.slot_ahead {
                SlotAhead::Fail => Err(format!(
                    "slot {}'s confirmed_flush_lsn {slot} is ahead of the last position pipeline \
                     {pipeline} committed to Kafka, {ours} (progress topic {topic}): something \
                     else consumed the slot, and the events between {ours} and {slot} are not in \
                     Kafka from walrelay. To resume at the slot anyway, set \
                     kafka.transactions.slot_ahead = \"trust_slot\"",
                    self.eos.slot
                )),
                SlotAhead::TrustSlot => {
                    warn!(
                        slot = self.eos.slot,
                        slot_confirmed = %slot,
                        progress = %ours,
                        "the slot is ahead of the committed progress; resuming at the slot \
                         (kafka.transactions.slot_ahead = trust_slot)"
                    );
                    Ok(SlotVerdict::Proceed)
                }
            },
            Some(_) => Ok(SlotVerdict::Proceed),
        }
    }
}
