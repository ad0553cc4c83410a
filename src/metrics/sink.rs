//! The Kafka sink's families (`sink`, `sink::publish`, `sink::dlq`): what
//! it produced, what Kafka refused or the dead-letter topic took, and the
//! time an event takes to its acknowledgement, split into [`Stages`]. The
//! exactly-once families are `exactly_once.rs`'s.
//!
//! Declarations for `declare_metrics!` (`metrics/declare.rs`), which
//! reads them in `metrics.rs`.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;

macro_rules! sink_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// Events produced to Kafka, by topic (`walrelay_events_total`).
            EVENTS events: Family<TopicLabel, Counter> {
                name: "walrelay_events",
                help: "Events produced to Kafka and acknowledged or in flight, by topic",
            }
            /// Permanent Kafka delivery failures, by error code (`walrelay_delivery_errors_total`).
            DELIVERY_ERRORS delivery_errors: Family<CodeLabel, Counter> {
                name: "walrelay_delivery_errors",
                help: "Permanent Kafka delivery failures, by error code",
            }
            /// Events sent to the dead-letter topic, by kind of problem
            /// (`walrelay_dead_lettered_total`).
            DEAD_LETTERED dead_lettered: Family<ReasonLabel, Counter> {
                name: "walrelay_dead_lettered",
                help: "Events sent to the dead-letter topic, by kind of problem",
            }
            /// The broker the pipeline publishes to, as a label
            /// (`walrelay_broker_info`; 1).
            BROKER_INFO broker_info: Family<BrokerLabel, Gauge> {
                name: "walrelay_broker_info",
                help: "The broker the pipeline publishes to (label broker), 1",
            }
            /// Records a broker other than Kafka acknowledged
            /// (`walrelay_broker_acked_total`; Kafka's are `walrelay_events_total`).
            BROKER_ACKED broker_acked: Family<BrokerLabel, Counter> {
                name: "walrelay_broker_acked",
                help: "Records a broker other than Kafka acknowledged (dead-letter records included)",
            }
            /// Records a broker other than Kafka refused for good
            /// (`walrelay_broker_refused_total`).
            BROKER_REFUSED broker_refused: Family<BrokerLabel, Counter> {
                name: "walrelay_broker_refused",
                help: "Records a broker other than Kafka refused for good",
            }
            /// Times a broker other than Kafka could not be reached or did
            /// not take records, each followed by a pause and a retry
            /// (`walrelay_broker_retries_total`).
            BROKER_RETRIES broker_retries: Family<BrokerLabel, Counter> {
                name: "walrelay_broker_retries",
                help: "Times a broker other than Kafka could not be reached or did not take records (each retried after a pause)",
            }
            /// Commit to Kafka acknowledgement latency, seconds.
            COMMIT_TO_ACK commit_to_ack: Histogram {
                name: "walrelay_commit_to_ack_seconds",
                help: "Seconds from source commit to Kafka acknowledgement",
                // 0.5 ms .. ~65 s
                buckets: exponential_buckets(0.0005, 2.0, 18),
            }
            /// An event's latency split into stages, seconds, label `stage`:
            /// see [`Stages`].
            STAGE_SECONDS stages: Stages {
                name: "walrelay_stage_seconds",
                help: "An event's latency by stage, seconds: commit_to_receive (per transaction), \
                       receive_to_produce and produce_to_ack (per event), ack_to_confirm (per status update)",
                buckets: stage_buckets(),
            }
        ] $($chain)* }
    };
}

/// 0.1 ms .. ~18 s in steps of √2, fine enough to read percentiles off;
/// each bound rounded to 4 significant digits so the `le` labels read
/// cleanly (0.0001414, not 0.00014142135623730952).
pub(super) fn stage_buckets() -> impl Iterator<Item = f64> + Clone {
    (0..36).map(|i| {
        let bound = 0.0001 * std::f64::consts::SQRT_2.powi(i);
        let scale = 10f64.powi(3 - bound.log10().floor() as i32);
        (bound * scale).round() / scale
    })
}

/// Label set `{stage}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StageLabel {
    /// Which stage of an event's way.
    pub(crate) stage: &'static str,
}

/// The family `walrelay_stage_seconds`: a histogram per stage, each a
/// field (so the hot path never looks a label up), exposed with its
/// `stage` label in the order below. Their sum is an event's way from its
/// commit to the slot's confirmation; the WAL source observes all four,
/// the polling source only `produce_to_ack`.
#[derive(Clone, Debug)]
pub(crate) struct Stages {
    /// `commit_to_receive`: the server's commit timestamp to walrelay
    /// reading the commit off the socket (the walsender's decoding and
    /// sending, the network, the socket buffers). Per transaction.
    pub(crate) commit_to_receive: Histogram,
    /// `receive_to_produce`: read off the socket to handed to the
    /// producer (decoding, assembly, the hand-over, routing). Per event.
    pub(crate) receive_to_produce: Histogram,
    /// `produce_to_ack`: handed to the producer to its delivery report
    /// (librdkafka's batching and the broker). Per event.
    pub(crate) produce_to_ack: Histogram,
    /// `ack_to_confirm`: the oldest transaction newly confirmed, fully
    /// acknowledged, to the status update that confirms it to the server.
    /// Per status update that moves the confirmed position.
    pub(crate) ack_to_confirm: Histogram,
}

impl Stages {
    /// Four histograms at zero, each with `buckets`.
    pub(crate) fn new(buckets: impl Iterator<Item = f64> + Clone) -> Stages {
        Stages {
            commit_to_receive: Histogram::new(buckets.clone()),
            receive_to_produce: Histogram::new(buckets.clone()),
            produce_to_ack: Histogram::new(buckets.clone()),
            ack_to_confirm: Histogram::new(buckets),
        }
    }

    fn each(&self) -> [(&'static str, &Histogram); 4] {
        [
            ("commit_to_receive", &self.commit_to_receive),
            ("receive_to_produce", &self.receive_to_produce),
            ("produce_to_ack", &self.produce_to_ack),
            ("ack_to_confirm", &self.ack_to_confirm),
        ]
    }
}

/// Encoded as a family of histograms labelled `stage`, as a
/// `Family<StageLabel, Histogram>` would be, in a fixed order.
impl EncodeMetric for Stages {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (stage, histogram) in self.each() {
            histogram.encode(encoder.encode_family(&StageLabel { stage })?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
