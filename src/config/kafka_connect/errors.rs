//! Kafka Connect's `errors.*` keys, translated into walrelay's
//! [`ErrorsConfig`](crate::sink::config::ErrorsConfig): `errors.tolerance`
//! and the dead-letter queue.
//!
//! Owns the decision for every `errors.*` key: read in [`translate_errors`]
//! or listed here as ignored. It never logs a value, puts no value in an
//! error but the tolerance or topic name it refuses (neither is a secret),
//! and never connects.

use super::{Draft, Keys, Notes};
use crate::config::ConfigError;
use crate::sink::config::Tolerance;

/// `errors.*` keys that do not change what reaches Kafka: warned about once,
/// by name, and ignored.
#[rustfmt::skip]
pub(super) const IGNORED_ERRORS_KEYS: &[(&str, &str)] = &[
    // Connect's logging and retrying of failed records; walrelay has its own.
    ("errors.log.enable", "ignored: walrelay logs every bad event at warn (dead-lettered) or error (stopped)"),
    ("errors.log.include.messages", "ignored: walrelay never logs record contents"),
    ("errors.retry.timeout", "ignored: walrelay retries transient failures forever"),
    ("errors.retry.delay.max.ms", "ignored: walrelay retries with its own backoff"),
];

/// `errors.*` key prefixes ignored with a warning.
#[rustfmt::skip]
pub(super) const IGNORED_ERRORS_PREFIXES: &[(&str, &str)] = &[
    ("errors.deadletterqueue.", "ignored: walrelay reads only errors.deadletterqueue.topic.name and .context.headers.enable"),
];

/// Kafka Connect's error handling: `errors.tolerance=all` with
/// `errors.deadletterqueue.topic.name` becomes walrelay's dead-letter
/// policy (Connect has dead-letter queues for sink connectors only; walrelay
/// gives its source one). `all` without a topic is refused: the events would
/// be skipped and lost.
pub(super) fn translate_errors(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    if let Some(t) = c.take("errors.tolerance") {
        draft.errors.tolerance = match t.trim().to_ascii_lowercase().as_str() {
            "none" => Tolerance::None,
            "all" => Tolerance::All,
            _ => {
                return Err(c.invalid("errors.tolerance", format!("{t:?} is not one of none, all")))
            }
        };
    }
    if let Some(topic) = c.take("errors.deadletterqueue.topic.name") {
        let topic = topic.trim();
        if !topic.is_empty() {
            crate::router::check_topic_name(topic).map_err(|reason| {
                c.invalid(
                    "errors.deadletterqueue.topic.name",
                    format!("{topic:?} is not a legal kafka topic name: {reason}"),
                )
            })?;
            draft.errors.dead_letter_topic = Some(topic.to_owned());
        }
    }
    // Connect's default is false; walrelay's is true, because a dead-letter
    // record without them does not say why or where from.
    draft.errors.dead_letter_context_headers =
        c.take_bool("errors.deadletterqueue.context.headers.enable", true)?;
    if c.take("errors.deadletterqueue.topic.replication.factor")
        .is_some()
    {
        notes.ignore(
            c.name("errors.deadletterqueue.topic.replication.factor"),
            "ignored: walrelay does not create topics; create the dead-letter topic yourself",
        );
    }
    if draft.errors.tolerance == Tolerance::All && draft.errors.dead_letter_topic.is_none() {
        return Err(ConfigError::Missing {
            key: c.name("errors.deadletterqueue.topic.name"),
            reason: "errors.tolerance=all sends bad events there; without it walrelay would skip and lose them".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{from_connect, Translation};
    use super::*;
    use crate::properties::parse_properties;

    fn translate(extra: &[(&str, &str)]) -> Result<Translation, ConfigError> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debezium");
        let read = |name: &str| {
            parse_properties(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
        };
        let mut connector = read("outbox-connector.properties");
        for (k, v) in extra {
            connector.insert((*k).into(), (*v).into());
        }
        from_connect(
            read("connect-standalone.properties"),
            connector,
            Path::new("w"),
            Path::new("c"),
        )
    }

    fn chain(e: &ConfigError) -> String {
        crate::chain::DisplayChain(e).to_string()
    }

    #[test]
    fn dead_letter_queue_keys() {
        let t = translate(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "outbox.dlq"),
            ("errors.deadletterqueue.topic.replication.factor", "3"),
            ("errors.log.enable", "true"),
            ("errors.log.include.messages", "true"),
        ])
        .unwrap();
        let e = &t.config.errors;
        assert_eq!(e.tolerance, Tolerance::All);
        assert_eq!(e.dead_letter(), Some("outbox.dlq"));
        // walrelay's default, not Connect's false.
        assert!(e.dead_letter_context_headers);
        for key in [
            "errors.deadletterqueue.topic.replication.factor",
            "errors.log.enable",
            "errors.log.include.messages",
        ] {
            assert!(t.ignored(key), "{key} should be warned about");
        }
        // Debezium's own handling of NULL keys and ids and of text it
        // cannot expand.
        assert_eq!(t.config.router.null_key, crate::router::NullPolicy::Allow);
        assert_eq!(
            t.config.router.invalid_json_payload,
            crate::router::InvalidJsonPolicy::Pass
        );

        let t = translate(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "outbox.dlq"),
            ("errors.deadletterqueue.context.headers.enable", "false"),
        ])
        .unwrap();
        assert!(!t.config.errors.dead_letter_context_headers);

        let t = translate(&[("errors.tolerance", "none")]).unwrap();
        assert_eq!(t.config.errors.dead_letter(), None);
    }

    #[test]
    fn tolerance_all_without_a_topic_is_refused() {
        let err = translate(&[("errors.tolerance", "all")]).unwrap_err();
        let text = chain(&err);
        assert!(
            text.contains("errors.deadletterqueue.topic.name") && text.contains("errors.tolerance"),
            "{text}"
        );
        let err = translate(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "no good"),
        ])
        .unwrap_err();
        assert!(
            chain(&err).contains("errors.deadletterqueue.topic.name"),
            "{err}"
        );
        let err = translate(&[("errors.tolerance", "some")]).unwrap_err();
        assert!(chain(&err).contains("errors.tolerance"), "{err}");
    }
}
