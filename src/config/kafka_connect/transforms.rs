//! The connector's `transforms=` chain: one Debezium outbox EventRouter,
//! optionally preceded by the PostgreSQL connector's
//! `DecodeLogicalDecodingMessageContent` (the logical-message outbox), the
//! router's options read by [`super::event_router`], and what the
//! transforms' predicates ([`super::predicates`]) mean for each kind of
//! record: accepted where walrelay emits what Debezium would, refused by
//! name where Debezium would publish plain change events or undecodable
//! records. It also decides which logical decoding messages become events,
//! and how: decoded and routed, or Debezium's `<topic.prefix>.message`
//! records, with the connector's `message.prefix.*.list`.
//!
//! Owns which transform keys are read, ignored (other transforms' keys, as
//! Kafka Connect ignores them) or refused. It never logs a value, never puts
//! a possibly secret value in an error, and never connects.

use std::collections::BTreeMap;

use super::predicates::{
    read_predicates, runs, sanitized_topic, take_condition, Condition, Record,
};
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

/// A connector key as the file spells it. `c` holds the transform keys:
/// in the Kafka Connect forms the connector's keys share their prefix, in
/// Debezium Server's they are under `debezium.source.` while `c`'s are
/// under `debezium.`.
fn connector_key(c: &Keys, draft: &Draft, key: &str) -> String {
    if draft.debezium.server_mode {
        format!("debezium.source.{key}")
    } else {
        c.name(key)
    }
}

/// Reads `transforms` and `transforms.<name>.*` (prefixed as `t` spells
/// them): exactly one EventRouter, whose options go through
/// [`super::event_router::event_router_options`]. Refuses predicates.
pub(in crate::config) fn translate_transforms(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    // Predicates are read (and checked) whether or not a transform uses one.
    let predicates = read_predicates(c, notes)?;
    let list = c.take("transforms").unwrap_or_default();
    let all: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    // What follows the EventRouter is Connect's chain after it.
    let router_at = all.iter().position(|n| {
        c.map
            .get(&format!("transforms.{n}.type"))
            .is_some_and(|t| t.trim() == EVENT_ROUTER)
    });
    let (before, after) = match router_at {
        Some(i) => (&all[..=i], &all[i + 1..]),
        None => (&all[..], &[][..]),
    };
    read_after_router(c, draft, after, &predicates, notes)?;
    // A HeaderFrom$Value before the router copies change event fields.
    let mut names_kept: Vec<&str> = Vec::with_capacity(before.len());
    for name in before {
        let class = c
            .map
            .get(&format!("transforms.{name}.type"))
            .map(|t| t.trim().to_owned());
        if class.as_deref() == Some(HEADER_FROM_VALUE) && router_at.is_some() {
            read_envelope_copy(c, draft, name, &predicates, notes)?;
        } else {
            names_kept.push(name);
        }
    }
    let names = names_kept.as_slice();
    let chain = "walrelay implements the outbox EventRouter, optionally preceded by \
                 DecodeLogicalDecodingMessageContent (transforms=decode,outbox), and \
                 followed by Kafka Connect's transforms";
    let (decode_name, name) = match names {
        [one] => (None, (*one).to_owned()),
        [first, second] => (Some((*first).to_owned()), (*second).to_owned()),
        // A connector of logical decoding messages only, without any
        // transform: Debezium's `<topic.prefix>.message` records.
        [] if !draft.captures_table => return decide_messages(c, draft, None, false, notes),
        [] => {
            return Err(c.unsupported(
                "transforms",
                format!("walrelay implements the outbox EventRouter: set transforms=outbox and transforms.outbox.type={EVENT_ROUTER}"),
            ))
        }
        _ => return Err(refuse_longer_chain(c, names, chain)),
    };
    let decode = match &decode_name {
        None => None,
        Some(d) => Some(decode_options(c, d, &name, &predicates, notes)?),
    };
    // The decode transform reads the content as bytes; under another
    // binary.handling.mode Debezium gives it a string and its task fails
    // at the first message.
    if decode.is_some()
        && draft.debezium.column_types.binary_handling_mode
            != crate::connect::pg_modes::BinaryMode::Bytes
    {
        return Err(ConfigError::Unsupported {
            key: connector_key(c, draft, "binary.handling.mode"),
            reason: "DecodeLogicalDecodingMessageContent needs the message content as bytes (Debezium's task fails at the first message otherwise); leave binary.handling.mode at bytes".into(),
        });
    }
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
                format!(
                    "walrelay implements {EVENT_ROUTER} only, not {other}: {}",
                    why_not(&other)
                ),
            ))
        }
        None => {
            return Err(ConfigError::Missing {
                key: c.name(&type_key),
                reason: format!("set it to {EVENT_ROUTER}"),
            })
        }
    }
    let router_condition = take_condition(c, &mut options, &prefix, &predicates)?;
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
    let chain = Chain {
        decode: decode.as_ref().map(|(d, n, _)| (d.as_str(), *n)),
        decode_condition: decode.as_ref().and_then(|(_, _, cond)| cond.as_ref()),
        router: &name,
        router_condition: router_condition.as_ref(),
    };
    let (message_decode, decode_sees_tombstones) = decide_chain(c, draft, &chain)?;
    decide_messages(c, draft, message_decode, decode_sees_tombstones, notes)?;
    // Other transforms' keys are ignored by Kafka Connect too.
    for key in c.take_prefixed("transforms.").into_keys() {
        notes.ignore(
            c.name(&format!("transforms.{key}")),
            "ignored: the transform is not listed in transforms",
        );
    }
    Ok(())
}

/// Reads the transforms after the EventRouter (`after`, in order) into
/// the draft's chain, with the predicates they name; each must be one
/// walrelay runs. The chain is built once here so a bad option is
/// refused by its key, and options no transform reads are noted as
/// ignored (Kafka Connect ignores them too).
fn read_after_router(
    c: &mut Keys,
    draft: &mut Draft,
    after: &[&str],
    predicates: &BTreeMap<String, super::predicates::Predicate>,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    use crate::connect::transforms::config::{self as chain, OptionValue, TransformSpec};
    if after.is_empty() {
        return Ok(());
    }
    let known: Vec<&str> = crate::connect::transforms::classes().collect();
    for name in after {
        let prefix = format!("transforms.{name}.");
        let mut options = c.take_prefixed(&prefix);
        let type_key = format!("{prefix}type");
        let class = match options.remove("type").map(|t| t.trim().to_owned()) {
            Some(t) if !t.is_empty() => t,
            _ => {
                return Err(ConfigError::Missing {
                    key: c.name(&type_key),
                    reason: "set the transform's class".to_owned(),
                })
            }
        };
        if !known.contains(&class.as_str()) {
            return Err(c.unsupported(
                &type_key,
                format!(
                    "walrelay does not run {class} after the EventRouter: {}",
                    why_not(&class)
                ),
            ));
        }
        let condition = take_condition(c, &mut options, &prefix, predicates)?;
        draft.transforms.push(TransformSpec {
            name: (*name).to_owned(),
            class,
            predicate: condition.as_ref().map(|cond| cond.alias.clone()),
            negate: condition.as_ref().map(|cond| cond.negate),
            options: options
                .into_iter()
                .map(|(k, v)| (k, OptionValue::Text(v)))
                .collect(),
        });
    }
    draft.predicates = predicates.iter().map(|(alias, p)| p.spec(alias)).collect();
    let (_, unused) =
        chain::build(&draft.transforms, &draft.predicates).map_err(|e| ConfigError::Invalid {
            key: c.name(&e.key),
            reason: e.reason,
        })?;
    for key in unused {
        notes.ignore(
            c.name(&key),
            "ignored: not an option of the transform (Kafka Connect ignores it too)",
        );
    }
    Ok(())
}

/// Kafka's `HeaderFrom$Value`, which Debezium's CloudEvents documentation
/// puts before the EventRouter.
const HEADER_FROM_VALUE: &str = "org.apache.kafka.connect.transforms.HeaderFrom$Value";

/// A `HeaderFrom$Value` before the EventRouter: it copies fields of the
/// change event (`source`, `op`, `transaction`) into headers, which walrelay
/// writes itself (`debezium.envelope_headers`). Accepted where it applies
/// to the outbox table's change events and to nothing walrelay does not
/// copy for (heartbeats, where Debezium's task fails for want of the
/// fields; logical decoding message records).
fn read_envelope_copy(
    c: &mut Keys,
    draft: &mut Draft,
    name: &str,
    predicates: &BTreeMap<String, super::predicates::Predicate>,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let prefix = format!("transforms.{name}.");
    let mut options = c.take_prefixed(&prefix);
    options.remove("type");
    let condition = take_condition(c, &mut options, &prefix, predicates)?;
    let list = |v: Option<String>| -> Vec<String> {
        v.map(|v| crate::connect::transforms::options::split_list(&v))
            .unwrap_or_default()
    };
    let fields = list(options.remove("fields"));
    let headers = list(options.remove("headers"));
    let operation = options.remove("operation").map(|o| o.trim().to_owned());
    let refuse = |key: &str, why: String| c.unsupported(&format!("{prefix}{key}"), why);
    if operation.as_deref() != Some("copy") {
        return Err(refuse(
            "operation",
            "before the EventRouter walrelay implements operation=copy only (a move takes the fields the router reads out of the change event)".to_owned(),
        ));
    }
    if fields.is_empty() || fields.len() != headers.len() {
        return Err(refuse(
            "fields",
            "fields and headers must name as many fields as headers (Kafka Connect refuses it too)"
                .to_owned(),
        ));
    }
    let mut pairs = Vec::with_capacity(fields.len());
    for (f, h) in fields.iter().zip(&headers) {
        match crate::router::EnvelopeField::parse(f) {
            Some(crate::router::EnvelopeField::Transaction) if draft.outbox.transaction_metadata => {
                return Err(refuse(
                    "fields",
                    "walrelay copies the transaction block only while provide.transaction.metadata is off (it is null then)".to_owned(),
                ))
            }
            Some(_) => pairs.push(format!("{f}:{h}")),
            None => {
                return Err(refuse(
                    "fields",
                    format!("before the EventRouter walrelay copies source, op and transaction, not {f:?}"),
                ))
            }
        }
    }
    let prefix_topic = draft.debezium.topic_prefix.clone();
    let context_headers = draft.debezium.extended_headers;
    fn record(topic: &str, context_headers: bool) -> super::predicates::Record<'_> {
        super::predicates::Record {
            topic,
            context_headers,
            tombstone: false,
        }
    }
    for table in draft.outbox.table_names() {
        let topic = sanitized_topic(&format!("{prefix_topic}.{table}"));
        if !runs(condition.as_ref(), &record(&topic, context_headers)) {
            return Err(refuse(
                "predicate",
                format!("it keeps the copy off the outbox table's change events (topic {topic}); walrelay copies for every outbox row"),
            ));
        }
    }
    if draft.tombstones_on_delete != Some(false) {
        for table in draft.outbox.table_names() {
            let topic = sanitized_topic(&format!("{prefix_topic}.{table}"));
            let tombstone = super::predicates::Record {
                tombstone: true,
                ..record(&topic, context_headers)
            };
            if runs(condition.as_ref(), &tombstone) {
                return Err(refuse(
                    "predicate",
                    "it applies to the delete tombstones (tombstones.on.delete is on), which have no value to copy from: Debezium's task fails at the first delete; set tombstones.on.delete=false as Debezium's documentation does".to_owned(),
                ));
            }
        }
    }
    if draft.heartbeat.interval_ms > 0 {
        let topic = draft.heartbeat.topic(&prefix_topic);
        if runs(condition.as_ref(), &record(&topic, context_headers)) {
            return Err(refuse(
                "predicate",
                format!("it applies to the heartbeat records ({topic}) too, which have no such fields: Debezium's task fails at the first heartbeat; exclude them with a predicate (TopicNameMatches on the heartbeat topic, negate=true) as Debezium's documentation does"),
            ));
        }
    }
    for k in options.into_keys() {
        if k != "replace.null.with.default" {
            notes.ignore(
                c.name(&format!("{prefix}{k}")),
                "ignored: not an option of HeaderFrom (Kafka Connect ignores it too)",
            );
        }
    }
    draft.debezium.envelope_headers = pairs;
    Ok(())
}

/// Transforms of Debezium 3.6.1's PostgreSQL plugin archive and Kafka
/// Connect's own that walrelay refuses, each with why.
const REFUSED: &[(&str, &str)] = &[
    (
        "io.debezium.transforms.ExtractNewRecordState",
        "it flattens Debezium change events, and an outbox pipeline publishes none (the EventRouter turns them into outbox events)",
    ),
    (
        "io.debezium.transforms.ExtractChangedRecordState",
        "it marks the changed fields of Debezium change events, and an outbox pipeline publishes none",
    ),
    (
        "io.debezium.transforms.ExtractSchemaToNewRecord",
        "it copies the schema of Debezium change events into them, and an outbox pipeline publishes none",
    ),
    (
        "io.debezium.transforms.ByLogicalTableRouter",
        "it routes change events by table; outbox events are routed by the EventRouter (route.by.field, route.topic.replacement)",
    ),
    (
        "io.debezium.transforms.SchemaChangeEventFilter",
        "it filters schema change events, which the PostgreSQL connector does not emit",
    ),
    (
        "io.debezium.transforms.TimezoneConverter",
        "it converts the timestamps of change events' before, after and source structs, which outbox events do not carry",
    ),
    (
        "io.debezium.transforms.GeometryFormatTransformer",
        "it converts geometry values of change events; walrelay maps no geometry type",
    ),
    (
        "io.debezium.transforms.SwapGeometryCoordinates",
        "it converts geometry values of change events; walrelay maps no geometry type",
    ),
    (
        "io.debezium.transforms.VectorToJsonConverter",
        "it converts vector values of change events; walrelay maps no vector type",
    ),
    (
        "io.debezium.transforms.openlineage.OpenLineage",
        "it reports OpenLineage events about the connector; walrelay has no OpenLineage integration",
    ),
    (
        "io.debezium.connector.postgresql.transforms.timescaledb.TimescaleDb",
        "it routes TimescaleDB hypertable change events, which an outbox pipeline does not publish",
    ),
];

/// Why a transform class is refused: its entry in [`REFUSED`], or that
/// walrelay does not know it.
fn why_not(class: &str) -> String {
    if let Some((_, why)) = REFUSED.iter().find(|(c, _)| *c == class) {
        return (*why).to_owned();
    }
    if crate::connect::transforms::classes().any(|c| c == class) {
        return "walrelay runs it after the EventRouter only: list it after the router in transforms".to_owned();
    }
    "walrelay does not know it".to_owned()
}

/// The error for a chain of more than two transforms: it names the first
/// transform that is neither the EventRouter nor the decode transform
/// (its `type` key and why), else the chain.
fn refuse_longer_chain(c: &Keys, names: &[&str], chain: &str) -> ConfigError {
    for name in names {
        let key = format!("transforms.{name}.type");
        let Some(class) = c.map.get(&key).map(|t| t.trim()) else {
            continue;
        };
        if class != EVENT_ROUTER && class != DECODE_MESSAGE {
            return c.unsupported(&key, format!("{chain}; not {class}: {}", why_not(class)));
        }
    }
    c.unsupported("transforms", chain)
}

/// The chain as configured: the decode transform (name,
/// `fields.null.include`) and the router, each with its condition.
struct Chain<'a> {
    decode: Option<(&'a str, bool)>,
    decode_condition: Option<&'a Condition>,
    router: &'a str,
    router_condition: Option<&'a Condition>,
}

/// Decides, for each kind of record that reaches the chain, what the
/// transforms' predicates make of it (Kafka Connect's
/// `TransformationStage`: a transform runs when `negate ^ test(record)`):
///
/// - the outbox table's change events must reach the router, or they would
///   be published as plain Debezium change events;
/// - a delete tombstone (`tombstones.on.delete`, default true) that reaches
///   the decode transform fails Debezium's task, and one the router skips
///   is published on the table's topic: both are refused;
/// - a message the decode transform decodes must reach the router (a
///   decoded record left unrouted is not something walrelay emits); one the
///   decode transform skips passes the router unchanged, as Debezium's
///   `<topic.prefix>.message` record.
///
/// Heartbeats and transaction metadata records pass both transforms
/// unchanged, whatever a predicate says. Returns the decode options that
/// apply to messages and whether tombstones reach the decode transform.
fn decide_chain(
    c: &Keys,
    draft: &Draft,
    chain: &Chain<'_>,
) -> Result<(Option<bool>, bool), ConfigError> {
    let prefix = &draft.debezium.topic_prefix;
    // Each outbox table's change events have a topic of their own; the
    // predicates must treat every one alike.
    let table_topics: Vec<String> = if draft.captures_table {
        draft
            .outbox
            .table_names()
            .iter()
            .map(|table| sanitized_topic(&format!("{prefix}.{table}")))
            .collect()
    } else {
        Vec::new()
    };
    let message_topic = sanitized_topic(&format!("{prefix}.message"));
    let change = |topic| Record {
        topic,
        context_headers: draft.debezium.extended_headers,
        tombstone: false,
    };
    let tombstone = |topic| Record {
        tombstone: true,
        ..change(topic)
    };
    let message = Record {
        topic: &message_topic,
        context_headers: false,
        tombstone: false,
    };
    let router_key = format!("transforms.{}.predicate", chain.router);
    // The router's predicate keeps it off records walrelay must route:
    // refused, `what` saying which and what Debezium would do instead.
    let router_off = |what: String| {
        let cond = chain
            .router_condition
            .map(Condition::describe)
            .unwrap_or_default();
        c.unsupported(
            &router_key,
            format!("{cond} keeps the EventRouter off {what}"),
        )
    };
    if let Some(cond) = chain.router_condition {
        if draft.captures_table && cond.predicate.per_record() {
            return Err(c.unsupported(
                &router_key,
                format!(
                    "{} is true only for the change events of an UPDATE that changes the \
                     primary key, so it cannot keep the EventRouter on every outbox row; \
                     walrelay applies the EventRouter to every row of the outbox table",
                    cond.describe()
                ),
            ));
        }
    }
    for table_topic in &table_topics {
        if !runs(chain.router_condition, &change(table_topic)) {
            return Err(router_off(format!(
                "the outbox table's change events (topic {table_topic}): Debezium would publish \
                 them as plain change events, which walrelay does not emit (a connector that \
                 captures other tables stays refused)"
            )));
        }
    }
    let tombstones = draft.captures_table && draft.tombstones_on_delete != Some(false);
    let mut decode_sees_tombstones = false;
    if let Some((decode, _)) = chain.decode {
        if let Some(cond) = chain.decode_condition {
            if draft.captures_table && cond.predicate.per_record() {
                return Err(c.unsupported(
                    &format!("transforms.{decode}.predicate"),
                    format!(
                        "{} depends on the row (an UPDATE that changes the primary key), \
                         not on the kind of record",
                        cond.describe()
                    ),
                ));
            }
        }
        decode_sees_tombstones = tombstones
            && table_topics
                .iter()
                .any(|t| runs(chain.decode_condition, &tombstone(t)));
    }
    if tombstones && !decode_sees_tombstones {
        let unrouted = table_topics
            .iter()
            .find(|t| !runs(chain.router_condition, &tombstone(t)));
        if let Some(table_topic) = unrouted {
            return Err(router_off(format!(
                "the delete tombstones (tombstones.on.delete is on): Debezium would publish them \
                 on {table_topic}, which walrelay does not; set tombstones.on.delete=false"
            )));
        }
    }
    let Some((decode, null_include)) = chain.decode else {
        return Ok((None, false));
    };
    if !runs(chain.decode_condition, &message) {
        // Messages pass the router unchanged: Debezium's message records.
        return Ok((None, decode_sees_tombstones));
    }
    if !runs(chain.router_condition, &message) {
        return Err(router_off(format!(
            "the messages {decode} decodes (topic {message_topic}): Debezium would publish \
             the decoded records unrouted, which walrelay does not emit"
        )));
    }
    Ok((Some(null_include), decode_sees_tombstones))
}

/// Reads the options of the decode transform named `name`, which must
/// come right before the EventRouter (`router`); returns its name, its
/// `fields.null.include` and its condition.
fn decode_options(
    c: &mut Keys,
    name: &str,
    router: &str,
    predicates: &BTreeMap<String, super::predicates::Predicate>,
    notes: &mut Notes,
) -> Result<(String, bool, Option<Condition>), ConfigError> {
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
    let condition = take_condition(c, &mut options, &prefix, predicates)?;
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
    Ok((name.to_owned(), null_include, condition))
}

/// Which messages are events and how they are rendered, from the chain
/// and the connector's `message.prefix.*.list`.
fn decide_messages(
    c: &mut Keys,
    draft: &mut Draft,
    decode: Option<bool>,
    decode_sees_tombstones: bool,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let form = match decode {
        // The EventRouter passes message records through unchanged:
        // Debezium's `<topic.prefix>.message` records, of every selected
        // prefix, as Debezium sends them.
        None => {
            if draft.tombstones_on_delete.is_some() && !decode_sees_tombstones {
                notes.ignore(
                    connector_key(c, draft, "tombstones.on.delete"),
                    "ignored: EventRouter drops delete tombstones either way",
                );
            }
            MessageForm::Envelope
        }
        Some(null_include) => MessageForm::Decode { null_include },
    };
    if decode_sees_tombstones {
        return Err(ConfigError::Unsupported {
            key: connector_key(c, draft, "tombstones.on.delete"),
            reason: "with DecodeLogicalDecodingMessageContent in the chain and an outbox table captured, \
             Debezium's task fails on the tombstone of the first DELETE (the outbox pattern \
             deletes its rows); set tombstones.on.delete=false, or give the decode transform a \
             predicate that skips tombstones (RecordIsTombstone, negate=true)"
                .into(),
        });
    }
    draft.outbox.debezium_messages = Some(MessageSelection {
        rule: std::mem::replace(&mut draft.message_rule, crate::txn::config::PrefixRule::All),
        // Debezium publishes them, rolled back or not.
        non_transactional: NonTransactional::Deliver,
    });
    draft.debezium.message_form = form;
    draft.outbox.source = if draft.captures_table {
        OutboxSource::Both
    } else {
        // Debezium's snapshot of no table publishes nothing.
        draft.replication.snapshot_mode = SnapshotMode::NoData;
        OutboxSource::Messages
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::data_props;
    use super::super::{from_connect, Translation};
    use crate::config::ConfigError;
    use crate::router::MessageForm;
    use crate::txn::config::OutboxSource;

    fn translate(edit: &[(&str, &str)]) -> Result<Translation, ConfigError> {
        let mut c = data_props("outbox-connector.properties");
        for (k, v) in edit {
            if v.is_empty() {
                c.remove(*k);
            } else {
                c.insert((*k).into(), (*v).into());
            }
        }
        from_connect(
            data_props("connect-standalone.properties"),
            c,
            Path::new("w.properties"),
            Path::new("c.properties"),
        )
    }

    fn refusal(edit: &[(&str, &str)], key: &str) -> String {
        let err = translate(edit).expect_err("refused");
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(text.contains(key), "{key} not named in: {text}");
        text
    }

    const DECODE: &str =
        "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
    const TOPIC: &str = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches";
    const HEADER: &str = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey";
    const TOMBSTONE: &str = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone";

    const KAFKA: &str = "org.apache.kafka.connect.transforms.";

    #[test]
    fn transforms_after_the_router_become_the_chain_in_order() {
        let t = translate(&[
            ("transforms", "outbox,rename,wrap,drop"),
            ("transforms.rename.type", &format!("{KAFKA}RegexRouter")),
            ("transforms.rename.regex", "outbox\\.event\\.(.*)"),
            ("transforms.rename.replacement", "events.$1"),
            ("transforms.rename.no.such", "1"),
            ("transforms.wrap.type", &format!("{KAFKA}HoistField$Value")),
            ("transforms.wrap.field", "event"),
            ("transforms.drop.type", &format!("{KAFKA}Filter")),
            ("transforms.drop.predicate", "p"),
            ("transforms.drop.negate", "true"),
            ("predicates", "p"),
            ("predicates.p.type", TOPIC),
            ("predicates.p.pattern", "events\\..*"),
        ])
        .unwrap();
        let names: Vec<(&str, &str)> = t
            .config
            .transforms
            .iter()
            .map(|s| (s.name.as_str(), s.class.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("rename", "org.apache.kafka.connect.transforms.RegexRouter"),
                (
                    "wrap",
                    "org.apache.kafka.connect.transforms.HoistField$Value"
                ),
                ("drop", "org.apache.kafka.connect.transforms.Filter"),
            ]
        );
        let drop = &t.config.transforms[2];
        assert_eq!(
            (drop.predicate.as_deref(), drop.negate),
            (Some("p"), Some(true))
        );
        assert!(t.ignored("transforms.rename.no.such"));
        let chain = t.config.chain().unwrap();
        assert_eq!(chain.describe().len(), 3);
    }

    #[test]
    fn a_bad_transform_after_the_router_is_refused_by_its_key() {
        let text = refusal(
            &[
                ("transforms", "outbox,cast"),
                ("transforms.cast.type", &format!("{KAFKA}Cast$Value")),
                ("transforms.cast.spec", "a:struct"),
            ],
            "transforms.cast.spec",
        );
        assert!(text.contains("struct"), "{text}");
        refusal(
            &[
                ("transforms", "outbox,x"),
                (
                    "transforms.x.type",
                    "io.debezium.transforms.ExtractNewRecordState",
                ),
            ],
            "transforms.x.type",
        );
        refusal(&[("transforms", "outbox,x")], "transforms.x.type");
        refusal(
            &[
                ("transforms", "outbox,x"),
                ("transforms.x.type", &format!("{KAFKA}Filter")),
                ("transforms.x.predicate", "nowhere"),
            ],
            "transforms.x.predicate",
        );
        // A transform before the router other than the decode one.
        refusal(
            &[
                ("transforms", "x,outbox"),
                ("transforms.x.type", &format!("{KAFKA}Filter")),
            ],
            "transforms.x.type",
        );
    }

    #[test]
    fn a_router_predicate_true_for_the_outbox_topic_is_accepted() {
        let t = translate(&[
            ("predicates", "isOutbox"),
            ("predicates.isOutbox.type", TOPIC),
            ("predicates.isOutbox.pattern", "shop\\.public\\..*"),
            ("transforms.outbox.predicate", "isOutbox"),
        ])
        .unwrap();
        assert_eq!(t.config.debezium.message_form, MessageForm::Envelope);
        for pattern in ["shop\\.message", "shop"] {
            let text = refusal(
                &[
                    ("predicates", "p"),
                    ("predicates.p.type", TOPIC),
                    ("predicates.p.pattern", pattern),
                    ("transforms.outbox.predicate", "p"),
                ],
                "transforms.outbox.predicate",
            );
            assert!(text.contains("plain change events"), "{text}");
        }
    }

    #[test]
    fn header_and_tombstone_predicates_follow_the_record_kind() {
        // Change events carry the context headers; messages do not.
        translate(&[
            ("predicates", "h"),
            ("predicates.h.type", HEADER),
            (
                "predicates.h.name",
                "__debezium.context.connectorLogicalName",
            ),
            ("transforms.outbox.predicate", "h"),
        ])
        .unwrap();
        refusal(
            &[
                ("extended.headers.enabled", "false"),
                ("predicates", "h"),
                ("predicates.h.type", HEADER),
                (
                    "predicates.h.name",
                    "__debezium.context.connectorLogicalName",
                ),
                ("transforms.outbox.predicate", "h"),
            ],
            "transforms.outbox.predicate",
        );
        refusal(
            &[
                ("predicates", "h"),
                ("predicates.h.type", HEADER),
                ("predicates.h.name", "__debezium.newkey"),
                ("transforms.outbox.predicate", "h"),
                ("transforms.outbox.negate", "true"),
            ],
            "transforms.outbox.predicate",
        );
        // Skipping tombstones only matters where there are tombstones.
        let skip_tombstones = [
            ("predicates", "t"),
            ("predicates.t.type", TOMBSTONE),
            ("transforms.outbox.predicate", "t"),
            ("transforms.outbox.negate", "true"),
        ];
        translate(&skip_tombstones).unwrap();
        let mut with = skip_tombstones.to_vec();
        with.push(("tombstones.on.delete", "true"));
        let text = refusal(&with, "transforms.outbox.predicate");
        assert!(text.contains("tombstones"), "{text}");
    }

    #[test]
    fn the_decode_transform_may_skip_tombstones_or_messages() {
        let decode = |extra: &[(&'static str, &'static str)]| {
            let mut e = vec![
                ("transforms", "decode,outbox"),
                ("transforms.decode.type", DECODE),
                ("tombstones.on.delete", "true"),
                ("predicates", "t,m"),
                ("predicates.t.type", TOMBSTONE),
                ("predicates.m.type", TOPIC),
                ("predicates.m.pattern", "shop\\.message"),
            ];
            e.extend_from_slice(extra);
            e
        };
        // Without a predicate the decode transform fails on tombstones.
        refusal(&decode(&[]), "tombstones.on.delete");
        let t = translate(&decode(&[
            ("transforms.decode.predicate", "t"),
            ("transforms.decode.negate", "true"),
        ]))
        .unwrap();
        assert_eq!(
            t.config.debezium.message_form,
            MessageForm::Decode {
                null_include: false
            }
        );
        assert_eq!(t.config.outbox.source, OutboxSource::Both);
        // Decoding only the messages' topic skips tombstones too.
        let t = translate(&decode(&[("transforms.decode.predicate", "m")])).unwrap();
        assert!(matches!(
            t.config.debezium.message_form,
            MessageForm::Decode { .. }
        ));
        // Decoding nothing but tombstones: messages stay Debezium's records,
        // and the tombstones fail the task.
        refusal(
            &decode(&[("transforms.decode.predicate", "t")]),
            "tombstones.on.delete",
        );
        let t = translate(&decode(&[
            ("transforms.decode.predicate", "m"),
            ("transforms.decode.negate", "true"),
            ("tombstones.on.delete", "false"),
        ]))
        .unwrap();
        assert_eq!(t.config.debezium.message_form, MessageForm::Envelope);
        // The router skipping decoded messages would publish them unrouted.
        let text = refusal(
            &decode(&[
                ("transforms.decode.predicate", "t"),
                ("transforms.decode.negate", "true"),
                ("transforms.outbox.predicate", "m"),
                ("transforms.outbox.negate", "true"),
            ]),
            "transforms.outbox.predicate",
        );
        assert!(text.contains("unrouted"), "{text}");
    }

    #[test]
    fn predicate_keys_are_checked_as_connect_does() {
        refusal(&[("predicates", "p")], "predicates.p.type");
        refusal(
            &[("predicates", "p"), ("predicates.p.type", TOPIC)],
            "predicates.p.pattern",
        );
        refusal(
            &[("predicates", "p"), ("predicates.p.type", HEADER)],
            "predicates.p.name",
        );
        refusal(
            &[
                ("predicates", "p"),
                ("predicates.p.type", "com.example.Custom"),
            ],
            "predicates.p.type",
        );
        refusal(
            &[
                ("predicates", "p"),
                ("predicates.p.type", TOPIC),
                ("predicates.p.pattern", "(?<=a)b"),
            ],
            "predicates.p.pattern",
        );
        refusal(
            &[("transforms.outbox.predicate", "nope")],
            "transforms.outbox.predicate",
        );
        refusal(
            &[("transforms.outbox.negate", "true")],
            "transforms.outbox.negate",
        );
        refusal(
            &[
                ("predicates", "p"),
                ("predicates.p.type", TOMBSTONE),
                ("transforms.outbox.predicate", "p"),
                ("transforms.outbox.negate", "maybe"),
            ],
            "transforms.outbox.negate",
        );
        // A listed predicate no transform uses is checked, then unused.
        let t = translate(&[
            ("predicates", "p"),
            ("predicates.p.type", TOMBSTONE),
            ("predicates.q.type", TOMBSTONE),
        ])
        .unwrap();
        assert!(t.ignored("predicates.q.type"));
    }
}
