//! The connector's `transforms=` chain: exactly one Debezium outbox
//! EventRouter, its options read by [`super::event_router`], and refusal of
//! predicates (walrelay applies the router to the outbox table
//! unconditionally).
//!
//! Owns which transform keys are read, ignored (other transforms' keys, as
//! Kafka Connect ignores them) or refused. It never logs a value, never puts
//! a possibly secret value in an error, and never connects.

use super::{Draft, Keys, Notes};
use crate::config::ConfigError;
use crate::txn::config::OpInvalidBehavior;

/// The only transform walrelay implements.
const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";

/// Reads `transforms` and `transforms.<name>.*` (prefixed as `t` spells
/// them): exactly one EventRouter, whose options go through
/// [`super::event_router::event_router_options`]. Refuses predicates.
pub(in crate::config) fn translate_transforms(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let list = c.take("transforms").unwrap_or_default();
    let names: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let name = match names.as_slice() {
        [one] => (*one).to_owned(),
        [] => {
            return Err(c.unsupported(
                "transforms",
                format!("walrelay implements the outbox EventRouter: set transforms=outbox and transforms.outbox.type={EVENT_ROUTER}"),
            ))
        }
        _ => {
            return Err(c.unsupported(
                "transforms",
                "walrelay implements exactly one transform, the outbox EventRouter",
            ))
        }
    };
    let prefix = format!("transforms.{name}.");
    let mut options = c.take_prefixed(&prefix);
    let type_key = format!("{prefix}type");
    match options.remove("type").map(|t| t.trim().to_owned()) {
        Some(t) if t == EVENT_ROUTER => {}
        Some(other) => {
            return Err(c.unsupported(
                &type_key,
                format!("walrelay implements {EVENT_ROUTER} only, not {other}"),
            ))
        }
        None => {
            return Err(ConfigError::Missing {
                key: c.name(&type_key),
                reason: format!("set it to {EVENT_ROUTER}"),
            })
        }
    }
    for conditional in ["predicate", "negate"] {
        if options.remove(conditional).is_some() {
            return Err(c.unsupported(
                &format!("{prefix}{conditional}"),
                "walrelay applies EventRouter to the outbox table unconditionally",
            ));
        }
    }
    let parsed =
        super::event_router::event_router_options(&options).map_err(|e| ConfigError::Invalid {
            key: c.name(&format!("transforms.{name}")),
            reason: e.to_string(),
        })?;
    draft.router = parsed.router;
    if let Some(behavior) = parsed.op_invalid_behavior {
        draft.outbox.op_invalid_behavior = behavior;
    }
    for key in parsed.unknown {
        notes.ignore(
            c.name(&format!("{prefix}{key}")),
            "ignored: not an EventRouter option walrelay implements",
        );
    }
    // Debezium never shows skipped updates to EventRouter, so they can
    // neither fail nor log there.
    if draft
        .replication
        .publish
        .as_deref()
        .is_some_and(|p| !p.contains("update"))
        && draft.outbox.op_invalid_behavior != OpInvalidBehavior::Warn
    {
        draft.outbox.op_invalid_behavior = OpInvalidBehavior::Warn;
    }
    // Other transforms' keys are ignored by Kafka Connect too.
    for key in c.take_prefixed("transforms.").into_keys() {
        notes.ignore(
            c.name(&format!("transforms.{key}")),
            "ignored: the transform is not listed in transforms",
        );
    }
    if let Some(key) = ["predicates"].into_iter().find(|k| c.map.contains_key(*k)) {
        return Err(c.unsupported(
            key,
            "walrelay applies EventRouter to the outbox table unconditionally",
        ));
    }
    if let Some(key) = c.map.keys().find(|k| k.starts_with("predicates.")).cloned() {
        return Err(c.unsupported(
            &key,
            "walrelay applies EventRouter to the outbox table unconditionally",
        ));
    }
    Ok(())
}
