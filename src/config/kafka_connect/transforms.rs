//! The connector's `transforms=` chain: one Debezium outbox EventRouter,
//! optionally preceded by the PostgreSQL connector's
//! `DecodeLogicalDecodingMessageContent` (the logical-message outbox), the
//! router's options read by [`super::event_router`], and refusal of
//! predicates (walrelay applies the chain unconditionally). It also
//! decides which logical decoding messages become events: the decoded
//! ones, with the connector's `message.prefix.*.list`.
//!
//! Owns which transform keys are read, ignored (other transforms' keys, as
//! Kafka Connect ignores them) or refused. It never logs a value, never puts
//! a possibly secret value in an error, and never connects.

use std::collections::BTreeMap;

use super::{Draft, Keys, Notes};
use crate::config::ConfigError;
use crate::postgres::config::SnapshotMode;
use crate::router::MessageForm;
use crate::txn::config::{MessageSelection, NonTransactional, OpInvalidBehavior, OutboxSource};

/// The router walrelay implements.
const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
/// The transform that turns a logical decoding message into an `after`
/// struct the EventRouter can route.
const DECODE_MESSAGE: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

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
    let chain = "walrelay implements the outbox EventRouter, optionally preceded by \
                 DecodeLogicalDecodingMessageContent (transforms=decode,outbox)";
    let (decode_name, name) = match names.as_slice() {
        [one] => (None, (*one).to_owned()),
        [first, second] => (Some((*first).to_owned()), (*second).to_owned()),
        // A connector of logical decoding messages only, without any
        // transform: Debezium's `<topic.prefix>.message` records.
        [] if !draft.captures_table => return decide_messages(c, draft, None, notes),
        [] => {
            return Err(c.unsupported(
                "transforms",
                format!("walrelay implements the outbox EventRouter: set transforms=outbox and transforms.outbox.type={EVENT_ROUTER}"),
            ))
        }
        _ => return Err(c.unsupported("transforms", chain)),
    };
    let decode = match &decode_name {
        None => None,
        Some(d) => Some(decode_options(c, d, &name, notes)?),
    };
    let prefix = format!("transforms.{name}.");
    let mut options = c.take_prefixed(&prefix);
    let type_key = format!("{prefix}type");
    match options.remove("type").map(|t| t.trim().to_owned()) {
        Some(t) if t == EVENT_ROUTER => {}
        Some(t) if t == DECODE_MESSAGE => {
            return Err(c.unsupported(
                &type_key,
                if decode.is_some() {
                    format!("{chain}; the chain has no EventRouter")
                } else {
                    format!(
                        "{chain}: without the EventRouter a decoded message is not an outbox event"
                    )
                },
            ))
        }
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
    decide_messages(c, draft, decode, notes)?;
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

/// Reads the options of the decode transform named `name`, which must
/// come right before the EventRouter (`router`); returns its
/// `fields.null.include`.
fn decode_options(
    c: &mut Keys,
    name: &str,
    router: &str,
    notes: &mut Notes,
) -> Result<bool, ConfigError> {
    let prefix = format!("transforms.{name}.");
    let mut options: BTreeMap<String, String> = c.take_prefixed(&prefix);
    let type_key = format!("{prefix}type");
    match options.remove("type").map(|t| t.trim().to_owned()) {
        Some(t) if t == DECODE_MESSAGE => {}
        Some(t) if t == EVENT_ROUTER => {
            return Err(c.unsupported(
                "transforms",
                format!(
                    "the EventRouter ({name}) comes before {router}: walrelay implements \
                     DecodeLogicalDecodingMessageContent followed by the EventRouter \
                     (after the router, messages would pass it unrouted)"
                ),
            ))
        }
        Some(other) => {
            return Err(c.unsupported(
                &type_key,
                format!("the first of two transforms must be {DECODE_MESSAGE}, not {other}"),
            ))
        }
        None => {
            return Err(ConfigError::Missing {
                key: c.name(&type_key),
                reason: format!("set it to {DECODE_MESSAGE}"),
            })
        }
    }
    for conditional in ["predicate", "negate"] {
        if options.remove(conditional).is_some() {
            return Err(c.unsupported(
                &format!("{prefix}{conditional}"),
                "walrelay applies the transforms unconditionally",
            ));
        }
    }
    let null_include = match options.remove("fields.null.include") {
        None => false,
        Some(v) => super::parse_bool(v.trim()).ok_or_else(|| ConfigError::Invalid {
            key: c.name(&format!("{prefix}fields.null.include")),
            reason: format!("{v:?} is not true or false"),
        })?,
    };
    for key in options.into_keys() {
        notes.ignore(
            c.name(&format!("{prefix}{key}")),
            "ignored: not an option of DecodeLogicalDecodingMessageContent",
        );
    }
    Ok(null_include)
}

/// Which messages are events and how they are rendered, from the chain
/// and the connector's `message.prefix.*.list`.
fn decide_messages(
    c: &mut Keys,
    draft: &mut Draft,
    decode: Option<bool>,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let Some(null_include) = decode else {
        if draft.tombstones_on_delete.is_some() {
            notes.ignore(
                c.name("tombstones.on.delete"),
                "ignored: EventRouter drops delete tombstones either way",
            );
        }
        // The EventRouter passes message records through unchanged:
        // Debezium's `<topic.prefix>.message` records, of every selected
        // prefix, as Debezium sends them.
        draft.outbox.debezium_messages = Some(MessageSelection {
            rule: std::mem::replace(&mut draft.message_rule, crate::txn::config::PrefixRule::All),
            non_transactional: NonTransactional::Deliver,
        });
        draft.debezium.message_form = MessageForm::Envelope;
        draft.outbox.source = if draft.captures_table {
            OutboxSource::Both
        } else {
            draft.replication.snapshot_mode = SnapshotMode::NoData;
            OutboxSource::Messages
        };
        return Ok(());
    };
    if draft.captures_table && draft.tombstones_on_delete != Some(false) {
        return Err(c.unsupported(
            "tombstones.on.delete",
            "with DecodeLogicalDecodingMessageContent in the chain and an outbox table captured, \
             Debezium's task fails on the tombstone of the first DELETE (the outbox pattern \
             deletes its rows); set tombstones.on.delete=false",
        ));
    }
    draft.outbox.debezium_messages = Some(MessageSelection {
        rule: std::mem::replace(&mut draft.message_rule, crate::txn::config::PrefixRule::All),
        // Debezium publishes them, rolled back or not.
        non_transactional: NonTransactional::Deliver,
    });
    draft.debezium.message_form = MessageForm::Decode { null_include };
    draft.outbox.source = if draft.captures_table {
        OutboxSource::Both
    } else {
        // Debezium's snapshot of no table publishes nothing.
        draft.replication.snapshot_mode = SnapshotMode::NoData;
        OutboxSource::Messages
    };
    Ok(())
}
