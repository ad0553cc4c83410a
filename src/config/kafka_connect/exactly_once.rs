//! Kafka Connect's exactly-once source keys (KIP-618), translated into
//! `[kafka] exactly_once` and `[kafka.transactions]`; and the refusal of the
//! same request in Debezium Server's form, which has no exactly-once mode.
//!
//! Owns every key that demands or shapes the guarantee: the worker's
//! `exactly.once.source.support`, `group.id`, `offset.flush.interval.ms` and
//! `offset.storage.{topic,partitions,replication.factor}`; the connector's
//! `exactly.once.support`, `transaction.boundary`,
//! `transaction.boundary.interval.ms` and `offsets.storage.topic`; the
//! producer's `transactional.id` and `transaction.timeout.ms` (collected by
//! `super::producer`). A key that demands exactly-once is never ignored: it
//! is translated or refused by name. Keys that only shape the transactions
//! are ignored, with a warning naming why, when exactly-once is off. It never
//! connects to anything and never puts a value it did not validate in an
//! error.
//!
//! Unlike Kafka Connect, walrelay runs exactly-once in the standalone form
//! too (its progress topic plays the part of distributed mode's offsets
//! topic), and its snapshot is inside transactions as well.

use super::{Draft, KafkaDraft, Keys, Notes, OFFSETS_IN_SLOT};
use crate::config::ConfigError;
use crate::postgres::config::SnapshotMode;
use crate::sink::config::TransactionsConfig;

/// Kafka Connect's default `offset.flush.interval.ms`, the default of
/// `transaction.boundary.interval.ms` (`WorkerConfig`).
pub(super) const CONNECT_OFFSET_FLUSH_INTERVAL_MS: u64 = 60_000;

/// The worker key that enables exactly-once source support.
const WORKER_SUPPORT: &str = "exactly.once.source.support";
/// The connector key that requires or requests it.
const CONNECTOR_SUPPORT: &str = "exactly.once.support";

/// Why a transaction key is ignored when exactly-once is off.
const EOS_OFF: &str =
    "ignored: exactly-once is off (the worker's exactly.once.source.support is not enabled), \
     so walrelay uses no Kafka transactions";
/// Why an offsets key is ignored in exactly-once mode.
pub(super) const OFFSETS_IN_PROGRESS_TOPIC: &str =
    "ignored: in exactly-once mode walrelay keeps its position in its progress topic \
     (offsets.storage.topic) and the replication slot";

/// The worker's `exactly.once.source.support`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkerSupport {
    Absent,
    Disabled,
    Preparing,
    Enabled,
}

impl WorkerSupport {
    fn describe(self) -> &'static str {
        match self {
            WorkerSupport::Absent => "absent (Kafka Connect's default is disabled)",
            WorkerSupport::Disabled => "disabled",
            WorkerSupport::Preparing => "preparing",
            WorkerSupport::Enabled => "enabled",
        }
    }
}

/// The worker's keys this module decides, taken out of the worker file
/// before its remaining keys are warned about.
#[derive(Debug)]
pub(super) struct WorkerKeys {
    support: WorkerSupport,
    /// A distributed worker's `group.id`: the first part of Kafka
    /// Connect's transactional id, `<group.id>-<name>-0`.
    group_id: Option<String>,
    /// `offset.flush.interval.ms`: the boundary interval when
    /// `transaction.boundary=interval` sets none of its own.
    flush_interval_ms: Option<u64>,
    /// `offset.storage.topic`: the progress topic unless the connector's
    /// `offsets.storage.topic` names one.
    topic: Option<String>,
    /// `offset.storage.partitions`; -1 (the broker's num.partitions) keeps
    /// walrelay's one partition.
    partitions: Option<i32>,
    /// `offset.storage.replication.factor`, -1 being the broker's default.
    replication_factor: Option<i32>,
    /// The keys present, for the warnings when exactly-once is off.
    present: Vec<&'static str>,
}

impl WorkerKeys {
    /// Whether the worker enables exactly-once source support.
    pub(super) fn enabled(&self) -> bool {
        self.support == WorkerSupport::Enabled
    }
}

/// Takes the worker's exactly-once keys out of `w`, validating their
/// values (errors name the key).
pub(super) fn take_worker(w: &mut Keys) -> Result<WorkerKeys, ConfigError> {
    let mut present = Vec::new();
    let support = match w.take(WORKER_SUPPORT) {
        None => WorkerSupport::Absent,
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "disabled" => WorkerSupport::Disabled,
            "preparing" => WorkerSupport::Preparing,
            "enabled" => WorkerSupport::Enabled,
            _ => {
                return Err(w.invalid(
                    WORKER_SUPPORT,
                    format!("{v:?} is not one of disabled, preparing, enabled"),
                ))
            }
        },
    };
    let group_id = w.take("group.id").filter(|g| !g.is_empty());
    if group_id.is_some() {
        present.push("group.id");
    }
    let flush_interval_ms = w.take_u64("offset.flush.interval.ms")?;
    if flush_interval_ms.is_some() {
        present.push("offset.flush.interval.ms");
    }
    let topic = w.take("offset.storage.topic").filter(|t| !t.is_empty());
    if topic.is_some() {
        present.push("offset.storage.topic");
    }
    let mut count = |w: &mut Keys, key: &'static str| -> Result<Option<i32>, ConfigError> {
        match w.take(key) {
            None => Ok(None),
            Some(v) => {
                present.push(key);
                match v.parse::<i32>() {
                    Ok(n) if n == -1 || n >= 1 => Ok(Some(n)),
                    _ => Err(w.invalid(
                        key,
                        format!("{v:?} is not -1 (the broker's default) or a positive integer"),
                    )),
                }
            }
        }
    };
    let partitions = count(w, "offset.storage.partitions")?;
    let replication_factor = count(w, "offset.storage.replication.factor")?;
    Ok(WorkerKeys {
        support,
        group_id,
        flush_interval_ms,
        topic,
        partitions,
        replication_factor,
        present,
    })
}

/// Refuses a producer `transactional.id` (walrelay derives the id, as
/// Kafka Connect does) and checks a `transaction.timeout.ms` value, in the
/// Kafka Connect form; called after each `translate_producer`, so the
/// error is reported in the file that has the key.
pub(super) fn check_connect_producer(kafka: &KafkaDraft) -> Result<(), ConfigError> {
    if let Some(key) = &kafka.transactional_id_key {
        return Err(ConfigError::Unsupported {
            key: key.clone(),
            reason:
                "walrelay derives the transactional id as Kafka Connect does (<group.id>-<name>-0 \
                     with the worker's group.id, else walrelay-<name>); remove it, or set \
                     kafka.transactions.transactional_id in walrelay's native TOML"
                    .into(),
        });
    }
    if let Some((key, value)) = &kafka.transaction_timeout {
        parse_timeout(key, value)?;
    }
    Ok(())
}

fn parse_timeout(key: &str, value: &str) -> Result<u64, ConfigError> {
    match value.parse::<u64>() {
        Ok(ms) if (1_000..=3_600_000).contains(&ms) => Ok(ms),
        _ => Err(ConfigError::Invalid {
            key: key.to_owned(),
            reason: format!(
                "{value:?} is not between 1000 and 3600000 ms (the broker caps it at its \
                 transaction.max.timeout.ms, 15 minutes by default)"
            ),
        }),
    }
}

/// The connector's exactly-once keys, read before the worker's decision is
/// applied so that a bad value is refused whether or not it would matter.
#[derive(Debug)]
struct ConnectorKeys {
    /// `exactly.once.support=required`: refuse to start at-least-once
    /// (`requested`, the default, runs either way).
    required: bool,
    /// Whether `transaction.boundary` was set at all, for the warning when
    /// exactly-once is off.
    boundary_set: bool,
    /// KIP-618's boundary; poll (walrelay's batching) when unset.
    boundary: Boundary,
    /// `transaction.boundary.interval.ms`, used with `boundary=interval`
    /// only.
    interval_ms: Option<u64>,
    /// `offsets.storage.topic`, which wins over the worker's
    /// `offset.storage.topic` as the progress topic.
    topic: Option<String>,
}

/// Decides exactly-once for the Kafka Connect form from the worker's keys
/// and the connector's (`c`, before `classify_rest`), into `draft`.
pub(super) fn translate_connect(
    worker: WorkerKeys,
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let connector = take_connector(c)?;
    if worker.support != WorkerSupport::Enabled {
        return at_least_once(worker, connector, c, draft, notes);
    }
    let name = pipeline_name(c, draft)?;
    refuse_snapshot_always(c, draft)?;
    let t = &mut draft.transactions;
    t.transactional_id = Some(match &worker.group_id {
        // Kafka Connect's Worker.taskTransactionalId: the same id fences a
        // KIP-618 task still running for this connector.
        Some(group) => format!("{group}-{name}-0"),
        None => format!("walrelay-{name}"),
    });
    t.pipeline = Some(name);
    translate_progress_topic(c, &connector, &worker, t)?;
    if let Some((key, value)) = &draft.kafka.transaction_timeout {
        t.timeout_ms = parse_timeout(key, value)?;
    }
    translate_boundary(&connector, &worker, c, draft, notes)?;
    draft.exactly_once = true;
    Ok(())
}

/// Takes the connector's exactly-once keys out of `c`, refusing a value
/// Kafka Connect would refuse (errors name the key).
fn take_connector(c: &mut Keys) -> Result<ConnectorKeys, ConfigError> {
    let required = match c.take(CONNECTOR_SUPPORT) {
        None => false,
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "requested" => false,
            "required" => true,
            _ => {
                return Err(c.invalid(
                    CONNECTOR_SUPPORT,
                    format!("{v:?} is not one of requested, required"),
                ))
            }
        },
    };
    let boundary_set = c.take("transaction.boundary");
    let boundary = match boundary_set
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("poll") => Boundary::Poll,
        Some("interval") => Boundary::Interval,
        Some("connector") => Boundary::Connector,
        Some(_) => {
            return Err(c.invalid(
                "transaction.boundary",
                format!(
                    "{:?} is not one of poll, interval, connector",
                    boundary_set.unwrap_or_default()
                ),
            ))
        }
    };
    Ok(ConnectorKeys {
        required,
        boundary_set: boundary_set.is_some(),
        boundary,
        interval_ms: c.take_u64("transaction.boundary.interval.ms")?,
        topic: c.take("offsets.storage.topic").filter(|t| !t.is_empty()),
    })
}

/// The worker does not enable exactly-once: a connector that requires it
/// is refused, naming both keys; otherwise every key that only shapes the
/// transactions or the offsets is ignored, saying why.
fn at_least_once(
    worker: WorkerKeys,
    connector: ConnectorKeys,
    c: &Keys,
    draft: &Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    if connector.required {
        return Err(c.unsupported(
            CONNECTOR_SUPPORT,
            format!(
                "it is required, but the worker's {WORKER_SUPPORT} is {}; set \
                 {WORKER_SUPPORT}=enabled in the worker file (walrelay supports it in the \
                 standalone form too), or set {CONNECTOR_SUPPORT}=requested to run \
                 at-least-once",
                worker.support.describe()
            ),
        ));
    }
    if connector.boundary_set {
        notes.ignore(c.name("transaction.boundary"), EOS_OFF);
    }
    if connector.interval_ms.is_some() {
        notes.ignore(c.name("transaction.boundary.interval.ms"), EOS_OFF);
    }
    if connector.topic.is_some() {
        notes.ignore(c.name("offsets.storage.topic"), OFFSETS_IN_SLOT);
    }
    if let Some((key, _)) = &draft.kafka.transaction_timeout {
        notes.ignore(key.clone(), EOS_OFF);
    }
    for key in worker.present {
        let why = if key == "group.id" {
            "ignored: walrelay has no worker group (with exactly.once.source.support=enabled it \
             names the transactional id)"
        } else {
            OFFSETS_IN_SLOT
        };
        notes.ignore(key, why);
    }
    Ok(())
}

/// The connector's `name`, which exactly-once requires: it keys the
/// pipeline's progress records and is part of its transactional id.
fn pipeline_name(c: &Keys, draft: &Draft) -> Result<String, ConfigError> {
    draft
        .connector_name
        .clone()
        .ok_or_else(|| ConfigError::Missing {
            key: c.name("name"),
            reason: format!(
            "with the worker's {WORKER_SUPPORT}=enabled the connector's name names the pipeline \
             (the key of its progress records) and its transactional id"
        ),
        })
}

/// `snapshot.mode=always` would publish every row again at each start,
/// duplicates that exactly-once exists to rule out.
fn refuse_snapshot_always(c: &Keys, draft: &Draft) -> Result<(), ConfigError> {
    if draft.replication.snapshot_mode == SnapshotMode::Always {
        return Err(c.unsupported(
            "snapshot.mode",
            format!(
                "always publishes the current rows again at every start, which exactly-once \
                 ({WORKER_SUPPORT}=enabled) cannot allow; use initial (the snapshot is then inside \
                 Kafka transactions too) or no_data"
            ),
        ));
    }
    Ok(())
}

/// The progress topic, walrelay's stand-in for distributed mode's offsets
/// topic: named by the connector's `offsets.storage.topic`, else the
/// worker's `offset.storage.topic` (an error names whichever was used),
/// with the worker's replication factor and partition count.
fn translate_progress_topic(
    c: &Keys,
    connector: &ConnectorKeys,
    worker: &WorkerKeys,
    t: &mut TransactionsConfig,
) -> Result<(), ConfigError> {
    let topic = match (connector.topic.clone(), worker.topic.clone()) {
        (Some(t), _) => Some((c.name("offsets.storage.topic"), t)),
        (None, Some(t)) => Some(("offset.storage.topic".to_owned(), t)),
        (None, None) => None,
    };
    if let Some((key, topic)) = topic {
        crate::router::check_topic_name(&topic).map_err(|reason| ConfigError::Invalid {
            key,
            reason: format!("{topic:?} is not a legal kafka topic name: {reason}"),
        })?;
        t.progress_topic = topic;
    }
    if let Some(rf) = worker.replication_factor {
        t.progress_topic_replication_factor = rf;
    }
    // -1 (the broker's num.partitions) keeps walrelay's one partition: the
    // progress topic holds one key per pipeline.
    if let Some(p) = worker.partitions.filter(|p| *p >= 1) {
        t.progress_topic_partitions = p;
    }
    Ok(())
}

/// `transaction.boundary`: `poll` is walrelay's batching (the interval
/// keys are then ignored, by name), `interval` sets
/// `kafka.transactions.interval_ms`, and `connector` is refused, as no
/// PostgreSQL connector defines boundaries of its own.
fn translate_boundary(
    connector: &ConnectorKeys,
    worker: &WorkerKeys,
    c: &Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    match connector.boundary {
        Boundary::Connector => Err(c.unsupported(
            "transaction.boundary",
            "connector: walrelay's connector defines no transaction boundaries of its own \
             (Debezium's PostgreSQL connector neither); use poll (walrelay's batching) or \
             interval",
        )),
        Boundary::Poll => {
            if connector.interval_ms.is_some() {
                notes.ignore(
                    c.name("transaction.boundary.interval.ms"),
                    "ignored: it applies only with transaction.boundary=interval",
                );
            }
            if worker.flush_interval_ms.is_some() {
                notes.ignore(
                    "offset.flush.interval.ms",
                    "ignored: walrelay commits its position with each Kafka transaction \
                     (transaction.boundary=poll: kafka.transactions.interval_ms)",
                );
            }
            Ok(())
        }
        Boundary::Interval => {
            draft.transactions.interval_ms = boundary_interval(connector, worker, c, draft)?;
            Ok(())
        }
    }
}

/// The interval of `transaction.boundary=interval`, as Kafka Connect picks
/// it: the connector's `transaction.boundary.interval.ms`, else the
/// worker's `offset.flush.interval.ms`, else 60000; refused unless below
/// the transaction timeout, since the broker aborts a transaction open
/// that long.
fn boundary_interval(
    connector: &ConnectorKeys,
    worker: &WorkerKeys,
    c: &Keys,
    draft: &Draft,
) -> Result<u64, ConfigError> {
    let (key, ms) = match (connector.interval_ms, worker.flush_interval_ms) {
        (Some(ms), _) => (c.name("transaction.boundary.interval.ms"), ms),
        (None, Some(ms)) => ("offset.flush.interval.ms".to_owned(), ms),
        (None, None) => (
            "transaction.boundary.interval.ms".to_owned(),
            CONNECT_OFFSET_FLUSH_INTERVAL_MS,
        ),
    };
    // 0 commits at every source-transaction boundary, as 1 does.
    let ms = ms.max(1);
    let timeout_ms = draft.transactions.timeout_ms;
    if ms >= timeout_ms {
        let timeout_key = draft
            .kafka
            .transaction_timeout
            .as_ref()
            .map_or("producer.override.transaction.timeout.ms", |(k, _)| k);
        return Err(c.invalid(
            &key,
            format!(
                "{ms} ms (Kafka Connect's default when unset is the worker's \
                 offset.flush.interval.ms, else 60000) is not below the transaction \
                 timeout ({timeout_ms} ms): a transaction open that long is aborted by the \
                 broker, so walrelay could not keep this boundary; set \
                 transaction.boundary.interval.ms lower or raise {timeout_key}"
            ),
        ));
    }
    Ok(ms)
}

/// KIP-618's `transaction.boundary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Boundary {
    Poll,
    Interval,
    Connector,
}

/// Debezium Server's form: it has no exactly-once mode, so a request for
/// one is refused by name, pointing to the native `[kafka] exactly_once`;
/// the keys that only shape transactions are ignored. `source` holds the
/// `debezium.source.` keys (before `classify_rest`).
pub(in crate::config) fn translate_server(
    source: &mut Keys,
    kafka: &KafkaDraft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    const NATIVE: &str = "Debezium Server has no exactly-once mode; walrelay's is \
                          `[kafka] exactly_once = true` in its native TOML (with \
                          `[kafka.transactions]`)";
    if let Some(key) = &kafka.transactional_id_key {
        return Err(ConfigError::Unsupported {
            key: key.clone(),
            reason: format!("{NATIVE}, whose transactional_id sets the id"),
        });
    }
    if let Some((key, _)) = &kafka.transaction_timeout {
        return Err(ConfigError::Unsupported {
            key: key.clone(),
            reason: format!("{NATIVE}, whose timeout_ms sets the transaction timeout"),
        });
    }
    if let Some(v) = source.take(CONNECTOR_SUPPORT) {
        if v.eq_ignore_ascii_case("required") {
            return Err(source.unsupported(CONNECTOR_SUPPORT, NATIVE));
        }
        notes.ignore(
            source.name(CONNECTOR_SUPPORT),
            "ignored: Debezium Server has no exactly-once mode (walrelay's is [kafka] exactly_once \
             in the native TOML)",
        );
    }
    for key in ["transaction.boundary", "transaction.boundary.interval.ms"] {
        if source.take(key).is_some() {
            notes.ignore(
                source.name(key),
                "ignored: Debezium Server uses no Kafka transactions",
            );
        }
    }
    if source.take("offsets.storage.topic").is_some() {
        notes.ignore(source.name("offsets.storage.topic"), OFFSETS_IN_SLOT);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::data_props;
    use super::super::{from_connect, Translation};
    use crate::chain::DisplayChain;
    use crate::config::debezium_server::from_server_text;
    use crate::config::ConfigError;

    fn run(
        worker: &[(&str, &str)],
        connector: &[(&str, &str)],
    ) -> Result<Translation, ConfigError> {
        let mut w = data_props("connect-standalone.properties");
        let mut c = data_props("outbox-connector.properties");
        for (map, edits) in [(&mut w, worker), (&mut c, connector)] {
            for (k, v) in edits {
                if v.is_empty() {
                    map.remove(*k);
                } else {
                    map.insert((*k).into(), (*v).into());
                }
            }
        }
        from_connect(w, c, Path::new("w"), Path::new("c"))
    }

    fn refused(worker: &[(&str, &str)], connector: &[(&str, &str)], keys: &[&str]) -> String {
        let err = run(worker, connector).expect_err("expected a refusal");
        let text = DisplayChain(&err).to_string();
        for key in keys {
            assert!(text.contains(key), "{key} not named in: {text}");
        }
        assert!(!text.contains("kafka-s3cret") && !text.contains("pg-s3cret"));
        text
    }

    const ON: (&str, &str) = ("exactly.once.source.support", "enabled");

    #[test]
    fn absent_or_disabled_worker_is_at_least_once() {
        for support in ["", "disabled", "preparing", "DISABLED"] {
            let t = run(&[("exactly.once.source.support", support)], &[]).unwrap();
            assert!(!t.config.kafka.exactly_once, "{support}");
            let t = run(
                &[("exactly.once.source.support", support)],
                &[("exactly.once.support", "requested")],
            )
            .unwrap();
            assert!(!t.config.kafka.exactly_once, "{support}");
        }
    }

    #[test]
    fn required_without_an_enabled_worker_is_refused_naming_both_keys() {
        for (support, shown) in [
            ("", "absent"),
            ("disabled", "disabled"),
            ("preparing", "preparing"),
        ] {
            let text = refused(
                &[("exactly.once.source.support", support)],
                &[("exactly.once.support", "required")],
                &[
                    "exactly.once.support",
                    "exactly.once.source.support=enabled",
                ],
            );
            assert!(text.contains(shown), "{text}");
            assert!(text.starts_with("in c"), "the connector file: {text}");
        }
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        refused(
            &[("exactly.once.source.support", "yes")],
            &[],
            &["exactly.once.source.support"],
        );
        refused(
            &[],
            &[("exactly.once.support", "always")],
            &["exactly.once.support"],
        );
        refused(
            &[],
            &[("transaction.boundary", "never")],
            &["transaction.boundary"],
        );
        refused(
            &[ON],
            &[("transaction.boundary.interval.ms", "-5")],
            &["transaction.boundary.interval.ms"],
        );
        refused(
            &[ON, ("offset.storage.partitions", "0")],
            &[],
            &["offset.storage.partitions"],
        );
        refused(
            &[ON, ("offset.storage.replication.factor", "x")],
            &[],
            &["offset.storage.replication.factor"],
        );
        refused(
            &[ON],
            &[("offsets.storage.topic", "bad topic")],
            &["offsets.storage.topic"],
        );
        let text = refused(
            &[ON, ("offset.storage.topic", "bad topic")],
            &[],
            &["offset.storage.topic"],
        );
        assert!(!text.contains("offsets.storage.topic"), "{text}");
        refused(
            &[ON, ("producer.transaction.timeout.ms", "10")],
            &[],
            &["producer.transaction.timeout.ms"],
        );
    }

    #[test]
    fn enabled_worker_turns_exactly_once_on_with_connects_names() {
        for support in [None, Some("requested"), Some("required")] {
            let connector: Vec<(&str, &str)> = support
                .map(|s| ("exactly.once.support", s))
                .into_iter()
                .collect();
            let t = run(&[ON], &connector).unwrap();
            let k = &t.config.kafka;
            assert!(k.exactly_once);
            let tx = &k.transactions;
            assert_eq!(tx.pipeline.as_deref(), Some("outbox-connector"));
            assert_eq!(
                tx.transactional_id.as_deref(),
                Some("walrelay-outbox-connector")
            );
            assert_eq!(tx.progress_topic, "walrelay-progress");
            assert_eq!(tx.interval_ms, crate::sink::config::DEFAULT_TXN_INTERVAL_MS);
            // The standalone worker's offset file is not where walrelay resumes.
            assert!(t.ignored("offset.storage.file.filename"));
            assert!(t
                .ignored
                .iter()
                .any(|i| i.key == "offset.storage.file.filename"
                    && i.reason.contains("progress topic")));
        }
        // A distributed worker's group.id: Kafka Connect's own task id, so
        // the KIP-618 task being replaced is fenced.
        let t = run(
            &[
                ON,
                ("group.id", "connect-cluster"),
                ("offset.storage.topic", "connect-offsets"),
                ("offset.storage.replication.factor", "3"),
                ("offset.storage.partitions", "25"),
                ("producer.transaction.timeout.ms", "120000"),
            ],
            &[],
        )
        .unwrap();
        let tx = &t.config.kafka.transactions;
        assert_eq!(
            tx.transactional_id.as_deref(),
            Some("connect-cluster-outbox-connector-0")
        );
        assert_eq!(tx.progress_topic, "connect-offsets");
        assert_eq!(tx.progress_topic_replication_factor, 3);
        assert_eq!(tx.progress_topic_partitions, 25);
        assert_eq!(tx.timeout_ms, 120_000);
        // The connector's own offsets topic and producer override win.
        let t = run(
            &[
                ON,
                ("offset.storage.topic", "connect-offsets"),
                ("offset.storage.partitions", "-1"),
                ("producer.transaction.timeout.ms", "120000"),
            ],
            &[
                ("offsets.storage.topic", "outbox-offsets"),
                ("producer.override.transaction.timeout.ms", "90000"),
            ],
        )
        .unwrap();
        let tx = &t.config.kafka.transactions;
        assert_eq!(tx.progress_topic, "outbox-offsets");
        assert_eq!(tx.progress_topic_partitions, 1);
        assert_eq!(tx.progress_topic_replication_factor, -1);
        assert_eq!(tx.timeout_ms, 90_000);
    }

    #[test]
    fn exactly_once_needs_a_name_and_no_snapshot_always() {
        refused(
            &[ON],
            &[("name", "")],
            &["name", "exactly.once.source.support"],
        );
        refused(
            &[ON],
            &[("snapshot.mode", "always")],
            &["snapshot.mode", "exactly.once.source.support"],
        );
        // At-least-once, always stays allowed.
        run(&[], &[("snapshot.mode", "always")]).unwrap();
    }

    #[test]
    fn transaction_boundaries() {
        // poll: walrelay's batching; the interval keys are ignored by name.
        let t = run(
            &[ON],
            &[
                ("transaction.boundary", "poll"),
                ("transaction.boundary.interval.ms", "5000"),
            ],
        )
        .unwrap();
        assert_eq!(
            t.config.kafka.transactions.interval_ms,
            crate::sink::config::DEFAULT_TXN_INTERVAL_MS
        );
        assert!(t.ignored("transaction.boundary.interval.ms"));
        assert!(t.ignored("offset.flush.interval.ms"));
        // interval: the connector's value ...
        let t = run(
            &[ON],
            &[
                ("transaction.boundary", "INTERVAL"),
                ("transaction.boundary.interval.ms", "5000"),
            ],
        )
        .unwrap();
        assert_eq!(t.config.kafka.transactions.interval_ms, 5_000);
        let t = run(
            &[ON],
            &[
                ("transaction.boundary", "interval"),
                ("transaction.boundary.interval.ms", "0"),
            ],
        )
        .unwrap();
        assert_eq!(t.config.kafka.transactions.interval_ms, 1);
        // ... else the worker's offset.flush.interval.ms (10000 in the example) ...
        let t = run(&[ON], &[("transaction.boundary", "interval")]).unwrap();
        assert_eq!(t.config.kafka.transactions.interval_ms, 10_000);
        // ... else Connect's 60000, which must stay below the timeout.
        refused(
            &[ON, ("offset.flush.interval.ms", "")],
            &[("transaction.boundary", "interval")],
            &[
                "transaction.boundary.interval.ms",
                "producer.override.transaction.timeout.ms",
            ],
        );
        let t = run(
            &[ON, ("offset.flush.interval.ms", "")],
            &[
                ("transaction.boundary", "interval"),
                ("producer.override.transaction.timeout.ms", "300000"),
            ],
        )
        .unwrap();
        assert_eq!(t.config.kafka.transactions.interval_ms, 60_000);
        refused(
            &[ON, ("producer.transaction.timeout.ms", "5000")],
            &[("transaction.boundary", "interval")],
            &[
                "offset.flush.interval.ms",
                "producer.transaction.timeout.ms",
            ],
        );
        // connector: refused by name.
        refused(
            &[ON],
            &[("transaction.boundary", "connector")],
            &["transaction.boundary", "defines no transaction boundaries"],
        );
    }

    #[test]
    fn at_least_once_ignores_the_transaction_keys_saying_why() {
        let t = run(
            &[
                ("group.id", "connect-cluster"),
                ("producer.transaction.timeout.ms", "90000"),
            ],
            &[
                ("transaction.boundary", "connector"),
                ("transaction.boundary.interval.ms", "5000"),
                ("offsets.storage.topic", "outbox-offsets"),
            ],
        )
        .unwrap();
        assert!(!t.config.kafka.exactly_once);
        for key in [
            "transaction.boundary",
            "transaction.boundary.interval.ms",
            "producer.transaction.timeout.ms",
        ] {
            let i = t.ignored.iter().find(|i| i.key == key).expect(key);
            assert!(i.reason.contains("exactly.once.source.support"), "{i:?}");
        }
        assert!(t.ignored("offsets.storage.topic"));
        assert!(t.ignored("group.id"));
        assert!(t.ignored("offset.flush.interval.ms"));
    }

    #[test]
    fn a_transactional_id_is_refused_in_either_file() {
        for mode in [None, Some(ON)] {
            let worker: Vec<(&str, &str)> = mode.into_iter().collect();
            let mut w = worker.clone();
            w.push(("producer.transactional.id", "mine"));
            let text = refused(&w, &[], &["producer.transactional.id", "transactional_id"]);
            assert!(text.starts_with("in w"), "{text}");
            let text = refused(
                &worker,
                &[("producer.override.transactional.id", "mine")],
                &["producer.override.transactional.id"],
            );
            assert!(text.starts_with("in c"), "{text}");
        }
    }

    #[test]
    fn rest_json_form_behaves_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let worker = dir.path().join("worker.properties");
        let mut text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/debezium/connect-standalone.properties"),
        )
        .unwrap();
        text.push_str("\nexactly.once.source.support=enabled\ngroup.id=cluster\n");
        std::fs::write(&worker, text).unwrap();
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/data/debezium/outbox-connector.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let write = |value: &serde_json::Value| {
            let path = dir.path().join("connector.json");
            std::fs::write(&path, value.to_string()).unwrap();
            path
        };
        // The REST form's top-level name names the pipeline.
        let mut rest = json.clone();
        rest["config"]["exactly.once.support"] = "required".into();
        let t = super::super::load_connect(&worker, &write(&rest)).unwrap();
        let tx = &t.config.kafka.transactions;
        assert!(t.config.kafka.exactly_once);
        assert_eq!(tx.pipeline.as_deref(), Some("outbox-connector"));
        assert_eq!(
            tx.transactional_id.as_deref(),
            Some("cluster-outbox-connector-0")
        );
        // A config name that differs from it is refused.
        let mut differ = rest.clone();
        differ["config"]["name"] = "other".into();
        let err = super::super::load_connect(&worker, &write(&differ)).unwrap_err();
        assert!(DisplayChain(&err).to_string().contains("name"), "{err}");
        // The same refusals as the properties form.
        let mut boundary = rest.clone();
        boundary["config"]["transaction.boundary"] = "connector".into();
        let err = super::super::load_connect(&worker, &write(&boundary)).unwrap_err();
        assert!(
            DisplayChain(&err)
                .to_string()
                .contains("transaction.boundary"),
            "{err}"
        );
        let plain = dir.path().join("plain.properties");
        std::fs::write(&plain, "key.converter=org.apache.kafka.connect.storage.StringConverter\nvalue.converter=org.apache.kafka.connect.storage.StringConverter\n").unwrap();
        let err = super::super::load_connect(&plain, &write(&rest)).unwrap_err();
        let text = DisplayChain(&err).to_string();
        assert!(
            text.contains("exactly.once.support") && text.contains("exactly.once.source.support"),
            "{text}"
        );
    }

    fn server(extra: &str) -> Result<Translation, ConfigError> {
        let text = format!(
            "debezium.sink.type=kafka\n\
             debezium.sink.kafka.producer.bootstrap.servers=k:9092\n\
             debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             debezium.source.database.hostname=db\n\
             debezium.source.database.user=u\n\
             debezium.source.database.dbname=d\n\
             debezium.source.plugin.name=pgoutput\n\
             debezium.source.table.include.list=public.outbox\n\
             debezium.source.topic.prefix=app\n\
             debezium.transforms=outbox\n\
             debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
             {extra}\n"
        );
        let none = |_: &str| None;
        from_server_text(&text, Path::new("application.properties"), &none)
    }

    #[test]
    fn debezium_server_refuses_a_request_for_transactions() {
        let t = server("").unwrap();
        assert!(!t.config.kafka.exactly_once);
        for key in [
            "debezium.sink.kafka.producer.transactional.id",
            "debezium.sink.kafka.producer.transaction.timeout.ms",
            "debezium.source.exactly.once.support",
        ] {
            let value = if key.ends_with("support") {
                "required"
            } else {
                "60000"
            };
            let err = server(&format!("{key}={value}")).unwrap_err();
            let text = DisplayChain(&err).to_string();
            assert!(
                text.contains(key) && text.contains("[kafka] exactly_once"),
                "{text}"
            );
        }
        let t = server(
            "debezium.source.exactly.once.support=requested\n\
             debezium.source.transaction.boundary=poll\n\
             debezium.source.offsets.storage.topic=x",
        )
        .unwrap();
        assert!(!t.config.kafka.exactly_once);
        for key in [
            "debezium.source.exactly.once.support",
            "debezium.source.transaction.boundary",
            "debezium.source.offsets.storage.topic",
        ] {
            assert!(t.ignored(key), "{key}: {:?}", t.ignored);
        }
    }
}
