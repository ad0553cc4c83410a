//! The compatibility suite: the real Debezium 3.6.1.Final (PostgreSQL
//! connector + outbox EventRouter on a Kafka Connect standalone worker,
//! `scripts/debezium.sh`) and walrelay run from the very same worker and
//! connector files, fed the same transactions, and every record compared:
//! topic, partition, key bytes, value bytes, header names, order and bytes.
//! Only the `__debezium.context.runId` value (a fresh UUID per task start:
//! compared with the UUID masked) and wall-clock record timestamps may
//! differ; cases whose timestamp comes from a column compare it too.
//!
//! Layout. Each case in [`CASES`] is a directory under `tests/compat/cases/`
//! with `worker.properties` and `connector.properties` (or the REST-form
//! `connector.json`), plus SQL files shared between cases: the table it
//! creates and the writes it feeds. Placeholders (`@BOOTSTRAP@`, `@PGPORT@`,
//! `@SLOT@`, `@TABLE@`, `@AGG@`, `@DB@`) are replaced per run; every case owns its
//! table, two slots and publications, and topics (all named after a unique
//! token) and removes the database objects afterwards (an inactive slot
//! would pin WAL in the shared cluster). The `example*` cases use the
//! documented files of `config/debezium` instead, pointed at the test
//! servers.
//!
//! Two brokers, not one. The topic is one of the things compared, and it is
//! computed from the row by `route.topic.regex`/`route.topic.replacement`,
//! so the two relays cannot be told apart by a topic prefix without changing
//! what is under test. Debezium therefore writes to the shared broker and
//! walrelay to a private one started for this test, and the two worker files
//! differ only in `bootstrap.servers`, the two connector files only in
//! `slot.name`/`publication.name` (one slot each on the same database: both
//! decode the same transactions). Topics are created beforehand with 6
//! partitions on both brokers, so the partition shows which key bytes each
//! producer hashed.
//!
//! Differences walrelay is known to have are listed in
//! [`KNOWN_DIFFERENCES`]: the comparison still runs, the listed difference
//! must still be there (an entry whose difference disappeared fails the
//! suite, so the list cannot rot; only entries marked intermittent, whose
//! difference depends on a race, are exempt), and any other difference
//! fails.
//!
//! The `server-json` case compares walrelay run from a Debezium Server
//! `application.properties` (format `json` for key, value and header)
//! against Kafka Connect with JsonConverter (`schemas.enable=true`) for key,
//! value AND header, which is what Debezium Server's `json` format is
//! (`ConverterBuilder`); Debezium Server itself is not available here. Its
//! Kafka sink also drops the router's partition and timestamp, so that case
//! uses neither a partition placement nor a timestamp column.
//!
//! Heartbeat topics (`__debezium-heartbeat.*`) get records on a clock, so
//! only their first [`HEARTBEATS_COMPARED`] records per partition are read
//! and compared, with the `ts_ms` value masked (the wall clock of each
//! relay); topic, partition, key bytes, the rest of the value bytes and the
//! headers must be equal.
//!
//! Fatal cases (`End::Fatal`) wait until Debezium's task has failed and
//! walrelay has exited, then compare what each delivered before.
//!
//! The `msg-*` cases feed the logical-message outbox
//! (`pg_logical_emit_message`, `tests/compat/cases/msg-*.sql`). The shared
//! database gets messages from every other test running at the same time
//! (walrelay's `walrelay_heartbeat`, other `outbox` prefixes, some of them
//! deliberately not JSON), so each case's prefixes, `topic.prefix` and route
//! values carry the run token and its connector includes only its own
//! prefixes; the one that needs an exclude list gets a database of its own
//! ([`Database::Private`]). Every feed starts with a committed transaction
//! whose prefix is not included: Debezium's `source.sequence` names the
//! previous commit, which must be one both relays decoded. The
//! `<topic.prefix>.message` records (no decode transform) carry Debezium's
//! wall clock in their top-level `ts_ms`, masked like a heartbeat's
//! ([`mask_message_clock`]); `source.ts_ms` is the commit time and is
//! compared. Transaction metadata's END records name each message's data
//! collection with a random identity hash, masked too
//! ([`mask_message_collections`]).
//!
//! Observed while building the matrix, not differences of walrelay:
//! Kafka Connect refuses a worker without `key.converter`/`value.converter`
//! (no default), as walrelay does; with `table.expand.json.payload`, when the
//! struct elements of one array have different fields and neither field list
//! is a prefix of the other (jsonb key order), Debezium's merged element
//! schema orders the fields differently from run to run (it merges the
//! element schemas out of a `HashSet`, apparently of `SchemaBuilder`s with
//! identity hashes), so no relay can match it
//! byte for byte and the feed avoids it; the broker rejects a whole producer
//! batch for one record timestamp an hour or more ahead, losing its
//! neighbours with Debezium as with walrelay.
//!
//! Environment: `scripts/env.sh up`, then
//! `cargo test --test integration compatibility::`.
//! `WALRELAY_COMPAT_CASES=a,b` runs only those cases,
//! `WALRELAY_COMPAT_PARALLEL` sets how many run at once (default 3),
//! `WALRELAY_COMPAT_KEEP=1` keeps every case's files and logs.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env, kafka_bootstrap, run_script, unique_name, PrivateKafka};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

/// Partitions of every topic a case declares (on both brokers).
const PARTITIONS: i32 = 6;

/// Debezium's default heartbeat topic prefix (`topic.heartbeat.prefix`).
const HEARTBEAT_TOPIC_PREFIX: &str = "__debezium-heartbeat.";
/// Records of a heartbeat topic partition that are compared.
const HEARTBEATS_COMPARED: usize = 3;

/// How a case ends.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Debezium delivers this many records in all; both relays keep running.
    Records(usize),
    /// Both relays stop on their own (`table.op.invalid.behavior=fatal`);
    /// Debezium delivered this many records before.
    Fatal(usize),
}

/// How walrelay is started from the case's files.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `walrelay connect-standalone worker.properties connector.*`.
    ConnectStandalone,
    /// `walrelay run --config application.properties` (Debezium Server).
    Server,
}

/// Which database a case's relays and feed use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Database {
    /// `postgres`, shared with every other test.
    Shared,
    /// A database named after the run token, created for the case and
    /// dropped afterwards: nothing else writes there, so a case can let
    /// every message prefix but a few through (`message.prefix.exclude.list`).
    Private,
}

/// One comparison.
struct Case {
    /// Directory under `tests/compat/cases/`.
    name: &'static str,
    /// Table DDL (under `cases/`).
    setup: &'static str,
    /// The writes, run by psql after both relays stream (under `cases/`).
    feed: &'static str,
    /// Topics (with `@AGG@`) created beforehand, and their partition count.
    topics: &'static [(&'static str, i32)],
    end: End,
    mode: Mode,
    /// The timestamp comes from a column, so it must be equal too.
    compare_timestamps: bool,
    /// Instead of the case directory: `config/debezium/connect-standalone.properties`
    /// and this connector file from there, pointed at the test servers.
    example: Option<&'static str>,
    /// `@DB@` in the connector file, and where setup and feed run.
    database: Database,
}

const DEFAULT_TOPICS: &[(&str, i32)] = &[
    ("outbox.event.U_@AGG@", PARTITIONS),
    ("outbox.event.V_@AGG@", PARTITIONS),
];

const fn case(name: &'static str, end: End) -> Case {
    Case {
        name,
        setup: "outbox.sql",
        feed: "feed.sql",
        topics: DEFAULT_TOPICS,
        end,
        mode: Mode::ConnectStandalone,
        compare_timestamps: false,
        example: None,
        database: Database::Shared,
    }
}

const fn with_sql(mut c: Case, setup: &'static str, feed: &'static str) -> Case {
    c.setup = setup;
    c.feed = feed;
    c
}

const fn with_topics(mut c: Case, topics: &'static [(&'static str, i32)]) -> Case {
    c.topics = topics;
    c
}

const PLACEMENT_TOPICS: &[(&str, i32)] = &[("outbox.event.P_@AGG@", PARTITIONS)];
const EXPAND_TOPICS: &[(&str, i32)] = &[("outbox.event.E_@AGG@", PARTITIONS)];
const TOMBSTONE_TOPICS: &[(&str, i32)] = &[("outbox.event.T_@AGG@", PARTITIONS)];
const INT_TOPICS: &[(&str, i32)] = &[("outbox.event.I_@AGG@", PARTITIONS)];
const BYTEA_TOPICS: &[(&str, i32)] = &[("outbox.event.B_@AGG@", PARTITIONS)];
const TIMESTAMP_TOPICS: &[(&str, i32)] = &[("outbox.event.S_@AGG@", PARTITIONS)];
const TYPES_TOPICS: &[(&str, i32)] = &[("outbox.event.Y_@AGG@", PARTITIONS)];
/// The default topics plus the heartbeat topic: `topic.prefix=test`,
/// `topic.heartbeat.prefix=__debezium-heartbeat.@AGG@`. Not `topic.prefix=@AGG@`:
/// Debezium decodes walrelay's heartbeat messages (`pg_logical_emit_message`)
/// into `<topic.prefix>.message`, which would then be read too.
const HEARTBEAT_TOPICS: &[(&str, i32)] = &[
    ("outbox.event.U_@AGG@", PARTITIONS),
    ("outbox.event.V_@AGG@", PARTITIONS),
    ("__debezium-heartbeat.@AGG@.test", PARTITIONS),
];

/// A logical-message case: no table (`msg-none.sql`), `feed` under `cases/`.
const fn msg(
    name: &'static str,
    end: End,
    feed: &'static str,
    topics: &'static [(&'static str, i32)],
) -> Case {
    with_topics(with_sql(case(name, end), "msg-none.sql", feed), topics)
}

/// The routes of `msg-feed.sql` (and the bad-content feeds).
const MSG_TOPICS: &[(&str, i32)] = &[
    ("outbox.event.M_@AGG@", PARTITIONS),
    ("outbox.event.N_@AGG@", PARTITIONS),
];
/// Debezium's own message topic (`topic.prefix=m_@AGG@`, no decode transform).
const MSG_ENVELOPE_TOPICS: &[(&str, i32)] = &[("m_@AGG@.message", PARTITIONS)];

/// A column-type case (`types-*`): one table, the Y_@AGG@ route.
const fn types_case(name: &'static str, end: End, setup: &'static str, feed: &'static str) -> Case {
    with_topics(with_sql(case(name, end), setup, feed), TYPES_TOPICS)
}

/// A `txmeta-*` case (`provide.transaction.metadata=true`): in a database
/// of its own, since Debezium then sends BEGIN and END records for every
/// transaction pgoutput delivers, and in the shared database other tests'
/// logical decoding messages bring theirs.
const fn txmeta(
    name: &'static str,
    records: usize,
    setup: &'static str,
    feed: &'static str,
    topics: &'static [(&'static str, i32)],
) -> Case {
    Case {
        database: Database::Private,
        ..with_topics(
            with_sql(case(name, End::Records(records)), setup, feed),
            topics,
        )
    }
}

/// Transaction metadata's END records with the identity hash in each
/// logical decoding message's data collection masked: Debezium names it
/// `...LogicalDecodingMessageMonitor$LogicalDecodingMessageId@<hash>`
/// (`Object.toString` of a new instance per message, random per JVM run),
/// so only the rest can be compared. With every entry of a transaction
/// masked alike, their order (a `HashMap`'s, by those random names) no
/// longer shows either.
fn mask_message_collections(mut topics: Topics) -> Topics {
    let re = regex::Regex::new(r"(LogicalDecodingMessageId@)[0-9a-f]+").expect("valid regex");
    for recs in topics.values_mut() {
        for r in recs.iter_mut() {
            if let Some(v) = r.value.as_mut() {
                if v.windows(24).any(|w| w == b"LogicalDecodingMessageId") {
                    let text = String::from_utf8_lossy(v).into_owned();
                    *v = re
                        .replace_all(&text, "${1}<hash>")
                        .into_owned()
                        .into_bytes();
                }
            }
        }
    }
    topics
}

/// The routes of `txmeta-feed.sql` and the transaction topic of
/// `topic.prefix=t_@AGG@`.
const TXMETA_TOPICS: &[(&str, i32)] = &[
    ("outbox.event.U_@AGG@", PARTITIONS),
    ("outbox.event.V_@AGG@", PARTITIONS),
    ("t_@AGG@.transaction", PARTITIONS),
];

/// The route of `names-feed.sql`.
const NAMES_TOPICS: &[(&str, i32)] = &[("outbox.event.N_@AGG@", PARTITIONS)];

/// A JSON-expansion failure case: the text-payload table, `feed`, the
/// `E_@AGG@` topic.
const fn expand_fail(name: &'static str, end: End, feed: &'static str) -> Case {
    with_topics(
        with_sql(case(name, end), "tombstone-empty.sql", feed),
        EXPAND_TOPICS,
    )
}

/// The matrix. Record counts are what Debezium 3.6.1 delivered.
const CASES: &[Case] = &[
    // Worker without converters (Connect's default: JsonConverter with
    // schemas), connector without any EventRouter option.
    case("defaults", End::Records(6)),
    case("string", End::Records(6)),
    // The connector in the REST form.
    case("json-schemas", End::Records(6)),
    case("json-noschemas", End::Records(6)),
    case("header-json", End::Records(6)),
    case("header-json-noschemas", End::Records(6)),
    // Connector-level converter overrides on top of the worker's.
    case("mixed-converters", End::Records(6)),
    with_topics(
        with_sql(
            case("placements-schemas", End::Records(3)),
            "placements.sql",
            "placements-feed.sql",
        ),
        PLACEMENT_TOPICS,
    ),
    with_topics(
        with_sql(
            case("placements-noschemas", End::Records(3)),
            "placements.sql",
            "placements-feed.sql",
        ),
        PLACEMENT_TOPICS,
    ),
    with_topics(
        with_sql(
            case("regex-groups", End::Records(4)),
            "outbox.sql",
            "regex-feed.sql",
        ),
        &[
            ("evt.EU.Order.@AGG@", PARTITIONS),
            ("evt.US.Invoice.@AGG@", PARTITIONS),
            ("nomatch.@AGG@", PARTITIONS),
        ],
    ),
    with_topics(
        with_sql(
            case("expand-schemas", End::Records(5)),
            "outbox.sql",
            "expand-feed.sql",
        ),
        EXPAND_TOPICS,
    ),
    with_topics(
        with_sql(
            case("expand-noschemas", End::Records(5)),
            "outbox.sql",
            "expand-feed.sql",
        ),
        EXPAND_TOPICS,
    ),
    with_topics(
        with_sql(
            case("tombstone-empty", End::Records(5)),
            "tombstone-empty.sql",
            "tombstone-empty-feed.sql",
        ),
        TOMBSTONE_TOPICS,
    ),
    with_topics(
        with_sql(
            case("tombstone-envelope", End::Records(4)),
            "outbox.sql",
            "tombstone-envelope-feed.sql",
        ),
        TOMBSTONE_TOPICS,
    ),
    with_topics(
        with_sql(
            case("int-ids", End::Records(3)),
            "int-ids.sql",
            "int-ids-feed.sql",
        ),
        INT_TOPICS,
    ),
    with_topics(
        with_sql(
            case("int-ids-simple", End::Records(3)),
            "int-ids.sql",
            "int-ids-feed.sql",
        ),
        INT_TOPICS,
    ),
    with_topics(
        with_sql(
            case("bytea-binary", End::Records(4)),
            "bytea.sql",
            "bytea-feed.sql",
        ),
        BYTEA_TOPICS,
    ),
    with_topics(
        with_sql(
            case("bytea-json", End::Records(4)),
            "bytea.sql",
            "bytea-feed.sql",
        ),
        BYTEA_TOPICS,
    ),
    with_topics(
        with_sql(
            case("uuid-key", End::Records(3)),
            "uuid-key.sql",
            "uuid-key-feed.sql",
        ),
        // A NULL key lands on any partition: that topic has only one.
        &[
            ("outbox.event.Q_@AGG@", PARTITIONS),
            ("outbox.event.N_@AGG@", 1),
        ],
    ),
    Case {
        compare_timestamps: true,
        ..with_topics(
            with_sql(
                case("timestamp", End::Records(3)),
                "timestamp.sql",
                "timestamp-feed.sql",
            ),
            TIMESTAMP_TOPICS,
        )
    },
    // The broker rejects a timestamp an hour or more ahead: both stop.
    Case {
        compare_timestamps: true,
        ..with_topics(
            with_sql(
                case("timestamp-future", End::Fatal(2)),
                "timestamp.sql",
                "timestamp-future-feed.sql",
            ),
            TIMESTAMP_TOPICS,
        )
    },
    // Debezium's default PostgreSQL type mapping as envelope fields and
    // headers, JsonConverter with schemas for key, value and header.
    with_topics(
        with_sql(
            case("types", End::Records(5)),
            "types.sql",
            "types-feed.sql",
        ),
        TYPES_TOPICS,
    ),
    // route.tombstone.on.empty.payload off: empty and blank strings are values.
    with_topics(
        with_sql(
            case("tombstone-off", End::Records(5)),
            "tombstone-empty.sql",
            "tombstone-empty-feed.sql",
        ),
        TOMBSTONE_TOPICS,
    ),
    // A JSON array mixing types has no schema: the payload stays a string.
    with_topics(
        with_sql(
            case("expand-mixed-array", End::Records(4)),
            "outbox.sql",
            "expand-mixed-array-feed.sql",
        ),
        EXPAND_TOPICS,
    ),
    with_sql(
        case("schema-version", End::Records(4)),
        "schema-version.sql",
        "schema-version-feed.sql",
    ),
    with_sql(
        case("update-warn", End::Records(4)),
        "outbox.sql",
        "update-feed.sql",
    ),
    with_sql(
        case("update-error", End::Records(4)),
        "outbox.sql",
        "update-feed.sql",
    ),
    with_sql(
        case("update-fatal", End::Fatal(1)),
        "outbox.sql",
        "update-fatal-feed.sql",
    ),
    // Debezium sends the inserts before the UPDATE of the same transaction,
    // then its task fails.
    with_sql(
        case("update-fatal-same-txn", End::Fatal(51)),
        "outbox.sql",
        "update-fatal-same-txn-feed.sql",
    ),
    Case {
        mode: Mode::Server,
        ..case("server-json", End::Records(6))
    },
    // heartbeat.interval.ms=1000: the six events plus the first
    // HEARTBEATS_COMPARED heartbeat records (JsonConverter with schemas,
    // then StringConverter).
    with_topics(
        case("heartbeat", End::Records(6 + HEARTBEATS_COMPARED)),
        HEARTBEAT_TOPICS,
    ),
    with_topics(
        case("heartbeat-string", End::Records(6 + HEARTBEATS_COMPARED)),
        HEARTBEAT_TOPICS,
    ),
    // The documented example files (config/debezium), only hosts, ports,
    // user, database, slot, table and plugin.path replaced.
    Case {
        example: Some("outbox-connector.properties"),
        ..case("example", End::Records(6))
    },
    Case {
        example: Some("outbox-connector.json"),
        ..case("example-json", End::Records(6))
    },
    // The logical-message outbox: DecodeLogicalDecodingMessageContent, then
    // the EventRouter (tests/compat/observed.md, "Logical decoding messages").
    // Payloads of every JSON type, numbers, escapes, keys and ids of other
    // types, duplicate members, a rollback, a savepoint, a non-transactional
    // message in a transaction that rolls back.
    msg(
        "msg-json-schemas",
        End::Records(15),
        "msg-feed.sql",
        MSG_TOPICS,
    ),
    msg(
        "msg-json-noschemas",
        End::Records(15),
        "msg-feed.sql",
        MSG_TOPICS,
    ),
    msg("msg-string", End::Records(15), "msg-feed.sql", MSG_TOPICS),
    // Header, envelope and partition placements of content members; the
    // envelope schema is named after the route value.
    msg(
        "msg-placements-schemas",
        End::Records(4),
        "msg-placements-feed.sql",
        &[
            ("outbox.event.P_@AGG@", PARTITIONS),
            ("outbox.event.Q_@AGG@", PARTITIONS),
        ],
    ),
    msg(
        "msg-placements-noschemas",
        End::Records(4),
        "msg-placements-feed.sql",
        &[
            ("outbox.event.P_@AGG@", PARTITIONS),
            ("outbox.event.Q_@AGG@", PARTITIONS),
        ],
    ),
    // table.expand.json.payload on JSON string members.
    msg(
        "msg-expand-schemas",
        End::Records(5),
        "msg-expand-feed.sql",
        &[("outbox.event.E_@AGG@", PARTITIONS)],
    ),
    msg(
        "msg-expand-noschemas",
        End::Records(5),
        "msg-expand-feed.sql",
        &[("outbox.event.E_@AGG@", PARTITIONS)],
    ),
    // route.tombstone.on.empty.payload with fields.null.include.
    msg(
        "msg-tombstone",
        End::Records(6),
        "msg-tombstone-feed.sql",
        &[("outbox.event.T_@AGG@", PARTITIONS)],
    ),
    // fields.null.include: JSON nulls as optional bytes, a null id and key
    // (a null key goes to any partition: that route has one).
    msg(
        "msg-nulls",
        End::Records(4),
        "msg-nulls-feed.sql",
        &[
            ("outbox.event.M_@AGG@", PARTITIONS),
            ("outbox.event.N_@AGG@", 1),
        ],
    ),
    msg(
        "msg-nulls-string",
        End::Records(4),
        "msg-nulls-feed.sql",
        &[
            ("outbox.event.M_@AGG@", PARTITIONS),
            ("outbox.event.N_@AGG@", 1),
        ],
    ),
    // No decode transform: Debezium's <topic.prefix>.message records
    // (MessageKey/MessageValue), transactional and not, committed and
    // rolled back, empty and binary content; with no transform at all, with
    // the EventRouter alone (it passes them through), and StringConverter.
    msg(
        "msg-envelope-schemas",
        End::Records(11),
        "msg-envelope-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    msg(
        "msg-envelope-noschemas",
        End::Records(11),
        "msg-envelope-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    msg(
        "msg-envelope-string",
        End::Records(11),
        "msg-envelope-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    // message.prefix.include.list: regexes, whole prefix, any case.
    msg(
        "msg-filter",
        End::Records(4),
        "msg-filter-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    // message.prefix.exclude.list, in a database of its own.
    Case {
        database: Database::Private,
        ..msg(
            "msg-exclude",
            End::Records(6),
            "msg-filter-feed.sql",
            MSG_ENVELOPE_TOPICS,
        )
    },
    // Bad content stops both, after the event before it.
    msg(
        "msg-bad-notjson",
        End::Fatal(1),
        "msg-bad-notjson-feed.sql",
        MSG_TOPICS,
    ),
    msg(
        "msg-bad-array",
        End::Fatal(1),
        "msg-bad-array-feed.sql",
        MSG_TOPICS,
    ),
    msg(
        "msg-bad-empty",
        End::Fatal(1),
        "msg-bad-empty-feed.sql",
        MSG_TOPICS,
    ),
    msg(
        "msg-bad-route",
        End::Fatal(1),
        "msg-bad-route-feed.sql",
        MSG_TOPICS,
    ),
    msg(
        "msg-bad-mixed-array",
        End::Fatal(1),
        "msg-bad-mixed-array-feed.sql",
        MSG_TOPICS,
    ),
    msg(
        "msg-bad-empty-key",
        End::Fatal(1),
        "msg-bad-empty-key-feed.sql",
        MSG_TOPICS,
    ),
    // Outbox table rows and messages in one connector (tombstones.on.delete=false).
    with_topics(
        with_sql(
            case("msg-mixed", End::Records(4)),
            "outbox.sql",
            "msg-mixed-feed.sql",
        ),
        &[("outbox.event.U_@AGG@", PARTITIONS)],
    ),
    // Column types under Debezium's type-mapping options
    // (decimal/time/interval/binary/hstore handling, money.fraction.digits).
    types_case(
        "types-num-double",
        End::Records(6),
        "types-num.sql",
        "types-num-special-feed.sql",
    ),
    types_case(
        "types-num-string",
        End::Records(6),
        "types-num.sql",
        "types-num-special-feed.sql",
    ),
    types_case(
        "types-num-precise",
        End::Records(6),
        "types-num.sql",
        "types-num-feed.sql",
    ),
    types_case(
        "types-num-precise-string",
        End::Records(6),
        "types-num.sql",
        "types-num-feed.sql",
    ),
    types_case(
        "types-time-adaptive",
        End::Records(8),
        "types-time.sql",
        "types-time-all-feed.sql",
    ),
    types_case(
        "types-time-adaptive-micro",
        End::Records(8),
        "types-time.sql",
        "types-time-all-feed.sql",
    ),
    types_case(
        "types-time-connect",
        End::Records(5),
        "types-time.sql",
        "types-time-connect-feed.sql",
    ),
    types_case(
        "types-time-iso",
        End::Records(8),
        "types-time.sql",
        "types-time-all-feed.sql",
    ),
    types_case(
        "types-time-micro",
        End::Records(8),
        "types-time.sql",
        "types-time-all-feed.sql",
    ),
    types_case(
        "types-time-nano",
        End::Records(8),
        "types-time.sql",
        "types-time-all-feed.sql",
    ),
    types_case(
        "types-interval-numeric",
        End::Records(6),
        "types-interval.sql",
        "types-interval-feed.sql",
    ),
    types_case(
        "types-interval-string",
        End::Records(6),
        "types-interval.sql",
        "types-interval-feed.sql",
    ),
    types_case(
        "types-bin-base64",
        End::Records(4),
        "types-bin.sql",
        "types-bin-feed.sql",
    ),
    types_case(
        "types-bin-urlsafe",
        End::Records(4),
        "types-bin.sql",
        "types-bin-feed.sql",
    ),
    types_case(
        "types-bin-hex",
        End::Records(4),
        "types-bin.sql",
        "types-bin-feed.sql",
    ),
    types_case(
        "types-hstore-json",
        End::Records(4),
        "types-hstore.sql",
        "types-hstore-feed.sql",
    ),
    types_case(
        "types-hstore-map",
        End::Records(4),
        "types-hstore.sql",
        "types-hstore-feed.sql",
    ),
    // binary.handling.mode on the `<topic.prefix>.message` records: the
    // content as a Base64 or hex STRING.
    msg(
        "types-msg-base64",
        End::Records(11),
        "msg-envelope-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    msg(
        "types-msg-hex",
        End::Records(11),
        "msg-envelope-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    // provide.transaction.metadata=true (docs/migration.md, "Transaction
    // metadata"): BEGIN and END of every transaction,
    // whether its events survive the EventRouter or not.
    txmeta(
        "txmeta-schemas",
        16,
        "outbox.sql",
        "txmeta-feed.sql",
        TXMETA_TOPICS,
    ),
    txmeta(
        "txmeta-noschemas",
        16,
        "outbox.sql",
        "txmeta-feed.sql",
        TXMETA_TOPICS,
    ),
    // StringConverter, topic.transaction set.
    txmeta(
        "txmeta-string",
        16,
        "outbox.sql",
        "txmeta-feed.sql",
        &[
            ("outbox.event.U_@AGG@", PARTITIONS),
            ("outbox.event.V_@AGG@", PARTITIONS),
            ("t_@AGG@.txn_@AGG@", PARTITIONS),
        ],
    ),
    // Logical decoding messages: the <topic.prefix>.message records carry
    // the transaction block; then the decode,outbox chain.
    txmeta(
        "txmeta-msg-envelope",
        25,
        "msg-none.sql",
        "msg-envelope-feed.sql",
        &[
            ("m_@AGG@.message", PARTITIONS),
            ("m_@AGG@.transaction", PARTITIONS),
        ],
    ),
    txmeta(
        "txmeta-msg-decode",
        33,
        "msg-none.sql",
        "msg-feed.sql",
        &[
            ("outbox.event.M_@AGG@", PARTITIONS),
            ("outbox.event.N_@AGG@", PARTITIONS),
            ("m_@AGG@.transaction", PARTITIONS),
        ],
    ),
    // JSON expansion failures (text payload): where Debezium has replaced
    // the payload's schema before the value failed, the text goes out under
    // the inferred schema and the task fails, unless StringConverter prints it.
    expand_fail(
        "expand-fail-array-schemas",
        End::Fatal(1),
        "expand-fail-array-feed.sql",
    ),
    expand_fail(
        "expand-fail-array-noschemas",
        End::Fatal(1),
        "expand-fail-array-feed.sql",
    ),
    expand_fail(
        "expand-fail-objects-schemas",
        End::Fatal(1),
        "expand-fail-objects-feed.sql",
    ),
    expand_fail(
        "expand-fail-nested-noschemas",
        End::Fatal(1),
        "expand-fail-nested-feed.sql",
    ),
    expand_fail(
        "expand-fail-envelope",
        End::Fatal(1),
        "expand-fail-array-feed.sql",
    ),
    expand_fail(
        "expand-fail-pass-schemas",
        End::Records(11),
        "expand-fail-pass-feed.sql",
    ),
    expand_fail(
        "expand-fail-pass-noschemas",
        End::Records(11),
        "expand-fail-pass-feed.sql",
    ),
    expand_fail(
        "expand-fail-string",
        End::Records(6),
        "expand-fail-string-feed.sql",
    ),
    // Predicates decided per kind of record: the router kept on the outbox
    // table's events by topic or by Debezium's context header, the decode
    // transform kept off tombstones (tombstones.on.delete=true) or off the
    // messages (Debezium's `<topic.prefix>.message` records).
    case("pred-topic", End::Records(6)),
    case("pred-header", End::Records(6)),
    with_topics(
        with_sql(
            case("pred-tombstone", End::Records(4)),
            "outbox.sql",
            "msg-mixed-feed.sql",
        ),
        &[("outbox.event.U_@AGG@", PARTITIONS)],
    ),
    msg(
        "pred-decode-skip",
        End::Records(11),
        "msg-envelope-feed.sql",
        MSG_ENVELOPE_TOPICS,
    ),
    // The connector's name adjustment: the envelope schema's name and the
    // after struct's field names, which the EventRouter options name.
    with_topics(
        with_sql(
            case("names-avro", End::Records(3)),
            "names.sql",
            "names-feed.sql",
        ),
        NAMES_TOPICS,
    ),
    with_topics(
        with_sql(
            case("names-unicode", End::Records(3)),
            "names.sql",
            "names-feed.sql",
        ),
        NAMES_TOPICS,
    ),
];

/// Differences walrelay is known to have, each with its reason. Every
/// difference a case shows must match an entry, and an entry whose
/// difference no longer shows fails the suite (remove it then), unless it
/// is marked intermittent.
const KNOWN_DIFFERENCES: &[Known] = &[
    // Empty: the two differences this suite found (characters outside the
    // BMP in JsonConverter output, and the inserts before a fatal UPDATE in
    // the same transaction) are fixed. Add an entry here only with a reason.
];

/// One Kafka record as read back, byte for byte.
#[derive(Debug, Clone)]
struct Rec {
    offset: i64,
    timestamp: Option<i64>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Records per (topic, partition), in offset order.
type Topics = BTreeMap<(String, i32), Vec<Rec>>;

fn count(t: &Topics) -> usize {
    t.values().map(Vec::len).sum()
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cases_dir() -> PathBuf {
    repo().join("tests/compat/cases")
}

/// Everything a case run needs to know about the environment.
struct Ctx {
    /// Broker Debezium writes to (the shared one).
    dbz_kafka: String,
    /// Broker walrelay writes to (private to this test).
    wr_kafka: String,
    pg_port: u16,
    keep: bool,
    /// Debezium's plugin directory (`debezium.sh classpath`).
    plugin_path: String,
}

/// What one case found.
struct Outcome {
    name: &'static str,
    /// Differences between the relays.
    diffs: Vec<Diff>,
    /// The case could not be run or the reference misbehaved.
    error: Option<String>,
    seconds: f64,
}

fn pg_url() -> String {
    pg_url_of("postgres")
}

fn pg_url_of(database: &str) -> String {
    format!(
        "host=127.0.0.1 port={} user=postgres dbname={database}",
        env().pg_port
    )
}

/// Runs SQL through psql (one statement at a time, as a client would).
fn psql(args: &[&OsStr]) -> Result<String, String> {
    psql_in("postgres", args)
}

/// [`psql`] in `database`.
fn psql_in(database: &str, args: &[&OsStr]) -> Result<String, String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d"])
        .arg(pg_url_of(database))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn psql_c(sql: &str) -> Result<String, String> {
    psql(&[OsStr::new("-c"), OsStr::new(sql)])
}

fn substitute(text: &str, vars: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out.replace(k, v);
    }
    out
}

/// A case's processes and database objects; removed on drop, panics or not.
struct Running {
    dbz_dir: PathBuf,
    dbz_started: bool,
    walrelay: Option<Child>,
    slots: Vec<String>,
    table: String,
    /// A private database to drop last (after the slots on it).
    database: Option<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.walrelay {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.dbz_started {
            let _ = Command::new(repo().join("scripts/debezium.sh"))
                .arg("stop")
                .arg(&self.dbz_dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status();
        }
        for slot in &self.slots {
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                let active = psql_c(&format!(
                    "select count(*) from pg_replication_slots where slot_name = '{slot}' and active"
                ));
                if matches!(active.as_deref().map(str::trim), Ok("0") | Err(_)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            if let Err(e) = psql_c(&format!(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = '{slot}'; drop publication if exists {slot}"
            )) {
                eprintln!("warning: cleanup of slot {slot}: {e}");
            }
        }
        if let Err(e) = psql_c(&format!("drop table if exists public.{}", self.table)) {
            eprintln!("warning: cleanup of table {}: {e}", self.table);
        }
        if let Some(db) = &self.database {
            if let Err(e) = psql_c(&format!("drop database if exists {db} with (force)")) {
                eprintln!("warning: cleanup of database {db}: {e}");
            }
        }
    }
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("compat_reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        // Everything the broker holds, as written (neither relay uses
        // transactions, so this changes nothing but never waits on an LSO).
        .set("isolation.level", "read_uncommitted")
        .create()
        .expect("consumer config is valid")
}

/// Reads every topic on `bootstrap` whose name contains `token`, from the
/// beginning to the current end of each partition. Blocking.
fn read_all(bootstrap: &str, token: &str) -> Topics {
    let c = consumer(bootstrap);
    let md = c
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("metadata of {bootstrap}: {e}"));
    let mut tpl = TopicPartitionList::new();
    let mut parts = HashSet::new();
    for t in md.topics().iter().filter(|t| t.name().contains(token)) {
        for p in t.partitions() {
            tpl.add_partition_offset(t.name(), p.id(), Offset::Beginning)
                .expect("offset Beginning is valid");
            parts.insert((t.name().to_string(), p.id()));
        }
    }
    let mut out = Topics::new();
    if parts.is_empty() {
        return out;
    }
    let mut high = BTreeMap::new();
    for (topic, p) in &parts {
        let (_, h) = c
            .fetch_watermarks(topic, *p, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("watermarks of {topic}[{p}] on {bootstrap}: {e}"));
        high.insert((topic.clone(), *p), h);
    }
    c.assign(&tpl).expect("assign partitions");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Done when every partition's position reached its high watermark
        // as of the start of this read.
        let pos = c.position().expect("consumer position");
        let behind: Vec<_> = high
            .iter()
            .filter(|((topic, p), h)| {
                let at = pos
                    .find_partition(topic, *p)
                    .and_then(|e| match e.offset() {
                        Offset::Offset(o) => Some(o),
                        _ => None,
                    })
                    .unwrap_or(0);
                **h > 0 && at < **h
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        if behind.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "reading {token} topics on {bootstrap}: {behind:?} did not reach their end (high watermarks {high:?}, positions {pos:?}, read {:?})",
            out.iter().map(|(tp, r)| (tp.clone(), r.len())).collect::<Vec<_>>()
        );
        match c.poll(Duration::from_millis(200)) {
            None | Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Ok(m)) => {
                let tp = (m.topic().to_string(), m.partition());
                out.entry(tp).or_default().push(Rec {
                    offset: m.offset(),
                    timestamp: m.timestamp().to_millis(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|hs| {
                            hs.iter()
                                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
            Some(Err(e)) => panic!("consume on {bootstrap}: {e}"),
        }
    }
    for recs in out.values_mut() {
        recs.sort_by_key(|r| r.offset);
    }
    out
}

async fn read_all_async(bootstrap: &str, token: &str) -> Topics {
    let (b, t) = (bootstrap.to_string(), token.to_string());
    let topics = tokio::task::spawn_blocking(move || read_all(&b, &t))
        .await
        .expect("reader thread panicked");
    mask_message_collections(mask_message_clock(heartbeats_only_first(topics)))
}

/// Debezium's `<topic.prefix>.message` records (no decode transform) with
/// the top-level `ts_ms` masked: it is the relay's wall clock when it
/// dispatched the message (`LogicalDecodingMessageMonitor`), so it differs
/// between any two runs. Only that field: it directly follows `op` (`m`) in
/// JsonConverter and StringConverter text alike, while `source.ts_ms` is the
/// commit time both relays decoded and stays compared.
fn mask_message_clock(mut topics: Topics) -> Topics {
    let ts = regex::Regex::new(r#"^(\{"schema":.*?"payload":\{"op":"m","ts_ms":|\{"op":"m","ts_ms":|Struct\{op=m,ts_ms=)-?[0-9]+"#)
        .expect("valid regex");
    for ((topic, _), recs) in topics.iter_mut() {
        if !topic.ends_with(".message") {
            continue;
        }
        for r in recs.iter_mut() {
            if let Some(v) = r.value.as_mut() {
                let text = String::from_utf8_lossy(v).into_owned();
                *v = ts.replace(&text, "${1}<ts_ms>").into_owned().into_bytes();
            }
        }
    }
    topics
}

/// Heartbeat partitions cut to their first [`HEARTBEATS_COMPARED`]
/// records, each value's `ts_ms` masked (the clock of each relay; the
/// converter framing around it must still be equal).
fn heartbeats_only_first(mut topics: Topics) -> Topics {
    let ts = regex::Regex::new(r#"(ts_ms=|"ts_ms":)-?[0-9]+"#).expect("valid regex");
    for ((topic, _), recs) in topics.iter_mut() {
        if !topic.starts_with(HEARTBEAT_TOPIC_PREFIX) {
            continue;
        }
        recs.truncate(HEARTBEATS_COMPARED);
        for r in recs.iter_mut() {
            if let Some(v) = r.value.as_mut() {
                let text = String::from_utf8_lossy(v).into_owned();
                *v = ts
                    .replace_all(&text, "${1}<ts_ms>")
                    .into_owned()
                    .into_bytes();
            }
        }
    }
    topics
}

/// Shows bytes: the text when it is UTF-8, hex otherwise.
fn show(b: &Option<Vec<u8>>) -> String {
    match b {
        None => "<null>".into(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => format!("{s:?}"),
            Err(_) => {
                let mut h = String::from("hex:");
                for x in b {
                    let _ = write!(h, "{x:02x}");
                }
                h
            }
        },
    }
}

/// The runId header with its UUID masked: the rest (converter framing)
/// must still be equal.
fn mask_uuid(b: &Option<Vec<u8>>) -> Option<String> {
    let s = String::from_utf8_lossy(b.as_deref()?).into_owned();
    let re = regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("valid regex");
    Some(re.replace_all(&s, "<uuid>").into_owned())
}

/// One difference between the relays' output.
#[derive(Debug, Clone)]
struct Diff {
    /// Where: `topic[partition]#index`, or `run` for the relay processes.
    at: String,
    /// What: `key`, `value`, `timestamp`, `header names`, `header <name>`,
    /// `record count`, `missing in walrelay`, `extra in walrelay`, `stop`.
    field: String,
    /// Debezium's bytes (UTF-8, lossy) or fact.
    debezium: Option<Vec<u8>>,
    /// walrelay's bytes or fact.
    walrelay: Option<Vec<u8>>,
}

impl Diff {
    fn new(at: &str, field: &str, debezium: Option<&[u8]>, walrelay: Option<&[u8]>) -> Diff {
        Diff {
            at: at.to_string(),
            field: field.to_string(),
            debezium: debezium.map(<[u8]>::to_vec),
            walrelay: walrelay.map(<[u8]>::to_vec),
        }
    }

    fn fact(at: &str, field: &str, debezium: &str, walrelay: &str) -> Diff {
        Diff::new(
            at,
            field,
            Some(debezium.as_bytes()),
            Some(walrelay.as_bytes()),
        )
    }
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: debezium={} walrelay={}",
            self.at,
            self.field,
            show(&self.debezium),
            show(&self.walrelay)
        )
    }
}

/// A difference walrelay is known to have: it matches a [`Diff`] of `case`
/// with this `field` whose sides contain these texts (UTF-8, unescaped).
struct Known {
    case: &'static str,
    field: &'static str,
    debezium: &'static str,
    walrelay: &'static str,
    reason: &'static str,
    /// A race decides whether it shows: its absence is reported, not failed.
    /// Only for differences that depend on timing, each with the race
    /// explained.
    intermittent: bool,
}

impl Known {
    fn matches(&self, case: &str, d: &Diff) -> bool {
        let text = |b: &Option<Vec<u8>>| match b {
            None => "<null>".to_string(),
            Some(b) => String::from_utf8_lossy(b).into_owned(),
        };
        self.case == case
            && d.field == self.field
            && text(&d.debezium).contains(self.debezium)
            && text(&d.walrelay).contains(self.walrelay)
    }
}

fn compare(dbz: &Topics, wr: &Topics, timestamps: bool) -> Vec<Diff> {
    let mut diffs = Vec::new();
    let keys: BTreeSet<_> = dbz.keys().chain(wr.keys()).cloned().collect();
    let empty = Vec::new();
    for tp in keys {
        let (topic, part) = &tp;
        let d = dbz.get(&tp).unwrap_or(&empty);
        let w = wr.get(&tp).unwrap_or(&empty);
        let here = format!("{topic}[{part}]");
        if d.len() != w.len() {
            diffs.push(Diff::fact(
                &here,
                "record count",
                &d.len().to_string(),
                &w.len().to_string(),
            ));
        }
        for (i, (a, b)) in d.iter().zip(w.iter()).enumerate() {
            let at = format!("{here}#{i}");
            if a.key != b.key {
                diffs.push(Diff::new(&at, "key", a.key.as_deref(), b.key.as_deref()));
            }
            if a.value != b.value {
                diffs.push(Diff::new(
                    &at,
                    "value",
                    a.value.as_deref(),
                    b.value.as_deref(),
                ));
            }
            if timestamps && a.timestamp != b.timestamp {
                diffs.push(Diff::fact(
                    &at,
                    "timestamp",
                    &format!("{:?}", a.timestamp),
                    &format!("{:?}", b.timestamp),
                ));
            }
            let names = |r: &Rec| r.headers.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
            if names(a) != names(b) {
                diffs.push(Diff::fact(
                    &at,
                    "header names",
                    &names(a).join(","),
                    &names(b).join(","),
                ));
                continue;
            }
            for ((name, va), (_, vb)) in a.headers.iter().zip(b.headers.iter()) {
                let equal = if name == "__debezium.context.runId" {
                    mask_uuid(va) == mask_uuid(vb)
                } else {
                    va == vb
                };
                if !equal {
                    diffs.push(Diff::new(
                        &at,
                        &format!("header {name}"),
                        va.as_deref(),
                        vb.as_deref(),
                    ));
                }
            }
        }
        for (i, r) in d.iter().enumerate().skip(w.len()) {
            diffs.push(Diff::new(
                &format!("{here}#{i}"),
                "missing in walrelay",
                r.value.as_deref(),
                None,
            ));
        }
        for (i, r) in w.iter().enumerate().skip(d.len()) {
            diffs.push(Diff::new(
                &format!("{here}#{i}"),
                "extra in walrelay",
                None,
                r.value.as_deref(),
            ));
        }
    }
    diffs
}

fn file_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The connector file of a case (`.properties` or `.json`).
fn connector_file(dir: &Path) -> PathBuf {
    let json = dir.join("connector.json");
    if json.exists() {
        json
    } else {
        dir.join("connector.properties")
    }
}

/// An example file of `config/debezium` with the keys that name servers,
/// credentials, the database, the slot and the table turned into this
/// suite's placeholders (`.properties` lines or REST-form JSON members).
fn example_template(text: &str, plugin_path: &str) -> String {
    let keys = [
        ("bootstrap.servers", "@BOOTSTRAP@"),
        ("plugin.path", plugin_path),
        ("database.hostname", "127.0.0.1"),
        ("database.port", "@PGPORT@"),
        ("database.user", "postgres"),
        ("database.dbname", "postgres"),
        ("slot.name", "@SLOT@"),
        ("publication.name", "@SLOT@"),
        ("table.include.list", "public.@TABLE@"),
    ];
    let mut out = text.to_string();
    for (key, value) in keys {
        let k = regex::escape(key);
        let line = regex::Regex::new(&format!("(?m)^{k}=.*$")).expect("valid regex");
        out = line
            .replace_all(&out, regex::NoExpand(&format!("{key}={value}")))
            .into_owned();
        let member = regex::Regex::new(&format!(r#""{k}": "[^"]*""#)).expect("valid regex");
        out = member
            .replace_all(&out, regex::NoExpand(&format!(r#""{key}": "{value}""#)))
            .into_owned();
    }
    out
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

async fn run_case(case: &'static Case, ctx: Arc<Ctx>) -> Outcome {
    let t0 = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&format!("walrelay-compat-{}-", case.name))
        .tempdir()
        .expect("create a temporary directory");
    let result = tokio::spawn(run_case_in(case, ctx.clone(), work.path().to_path_buf())).await;
    let (diffs, error) = match result {
        Ok(Ok(diffs)) => (diffs, None),
        Ok(Err(e)) => (Vec::new(), Some(e)),
        Err(e) => (Vec::new(), Some(format!("panicked: {e}"))),
    };
    let unexpected = diffs
        .iter()
        .any(|d| !KNOWN_DIFFERENCES.iter().any(|k| k.matches(case.name, d)));
    if ctx.keep || error.is_some() || unexpected {
        let kept = work.keep();
        eprintln!("{}: files and logs kept in {}", case.name, kept.display());
    }
    Outcome {
        name: case.name,
        diffs,
        error,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

async fn run_case_in(
    case: &'static Case,
    ctx: Arc<Ctx>,
    work: PathBuf,
) -> Result<Vec<Diff>, String> {
    let token = unique_name(&case.name.replace('-', "_"));
    let (slot_d, slot_w) = (format!("{token}_d"), format!("{token}_w"));
    let database = match case.database {
        Database::Shared => "postgres".to_string(),
        Database::Private => token.clone(),
    };
    let src = cases_dir().join(case.name);
    let port = ctx.pg_port.to_string();
    let vars = |bootstrap: &str, slot: &str| -> Vec<(String, String)> {
        vec![
            ("@BOOTSTRAP@".into(), bootstrap.into()),
            ("@PGPORT@".into(), port.clone()),
            ("@SLOT@".into(), slot.into()),
            ("@TABLE@".into(), token.clone()),
            ("@AGG@".into(), token.clone()),
            ("@DB@".into(), database.clone()),
        ]
    };
    let dbz_vars = vars(&ctx.dbz_kafka, &slot_d);
    let wr_vars = vars(&ctx.wr_kafka, &slot_w);
    let (dbz_in, wr_in) = (work.join("debezium-input"), work.join("walrelay"));
    std::fs::create_dir_all(&dbz_in).expect("mkdir");
    std::fs::create_dir_all(&wr_in).expect("mkdir");
    let (worker_tpl, conn_tpl, conn_name) = match case.example {
        None => {
            let connector = connector_file(&src);
            (
                file_text(&src.join("worker.properties")),
                file_text(&connector),
                connector.file_name().expect("file name").to_owned(),
            )
        }
        Some(file) => {
            let examples = repo().join("config/debezium");
            (
                example_template(
                    &file_text(&examples.join("connect-standalone.properties")),
                    &ctx.plugin_path,
                ),
                example_template(&file_text(&examples.join(file)), &ctx.plugin_path),
                file.into(),
            )
        }
    };
    let write = |text: &str, to: &Path, vars: &[(String, String)]| {
        let v: Vec<(&str, &str)> = vars.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        std::fs::write(to, substitute(text, &v))
            .unwrap_or_else(|e| panic!("write {}: {e}", to.display()));
    };
    write(&worker_tpl, &dbz_in.join("worker.properties"), &dbz_vars);
    write(&conn_tpl, &dbz_in.join(&conn_name), &dbz_vars);
    match case.mode {
        Mode::ConnectStandalone => {
            write(&worker_tpl, &wr_in.join("worker.properties"), &wr_vars);
            write(&conn_tpl, &wr_in.join(&conn_name), &wr_vars);
        }
        Mode::Server => write(
            &file_text(&src.join("application.properties")),
            &wr_in.join("application.properties"),
            &wr_vars,
        ),
    }
    let sql_vars = vec![("@TABLE@", token.as_str()), ("@AGG@", token.as_str())];
    let setup = work.join("setup.sql");
    std::fs::write(
        &setup,
        substitute(&file_text(&cases_dir().join(case.setup)), &sql_vars),
    )
    .expect("write setup.sql");
    let feed = work.join("feed.sql");
    std::fs::write(
        &feed,
        substitute(&file_text(&cases_dir().join(case.feed)), &sql_vars),
    )
    .expect("write feed.sql");

    for (pattern, partitions) in case.topics {
        let topic = pattern.replace("@AGG@", &token);
        common::create_topic_on(&ctx.dbz_kafka, &topic, *partitions).await;
        common::create_topic_on(&ctx.wr_kafka, &topic, *partitions).await;
    }
    let dbz_dir = work.join("debezium");
    let mut running = Running {
        dbz_dir: dbz_dir.clone(),
        dbz_started: false,
        walrelay: None,
        slots: vec![slot_d.clone(), slot_w.clone()],
        table: token.clone(),
        database: (case.database == Database::Private).then(|| database.clone()),
    };
    if case.database == Database::Private {
        psql_c(&format!("create database {database}"))?;
    }
    psql_in(&database, &[OsStr::new("-f"), setup.as_os_str()])?;

    // Both relays start at once; each must be streaming (not merely hold an
    // active slot, which it does while waiting for a consistent point)
    // before anything is written.
    let dbz_start = {
        let (dir, worker, conn) = (
            dbz_dir.clone(),
            dbz_in.join("worker.properties"),
            dbz_in.join(&conn_name),
        );
        tokio::task::spawn_blocking(move || {
            run_script(
                "debezium.sh",
                &[
                    OsStr::new("standalone"),
                    dir.as_os_str(),
                    worker.as_os_str(),
                    conn.as_os_str(),
                ],
            );
        })
    };
    let wr_log = wr_in.join("walrelay.log");
    let log = std::fs::File::create(&wr_log).expect("walrelay log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walrelay"));
    cmd.current_dir(&wr_in)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .env("WALRELAY_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log fd"))
        .stderr(log);
    match case.mode {
        Mode::ConnectStandalone => {
            cmd.arg("connect-standalone")
                .arg("worker.properties")
                .arg(&conn_name);
        }
        Mode::Server => {
            cmd.args(["run", "--config", "application.properties"]);
        }
    }
    running.walrelay = Some(cmd.spawn().map_err(|e| format!("spawn walrelay: {e}"))?);
    // Awaited before anything can fail, so the drop guard knows to stop it.
    let started = dbz_start.await;
    running.dbz_started = started.is_ok();
    started.map_err(|e| format!("debezium.sh standalone failed: {e}"))?;
    let dbz_wait = {
        let (dir, slot) = (dbz_dir.clone(), slot_d.clone());
        tokio::task::spawn_blocking(move || {
            run_script(
                "debezium.sh",
                &[
                    OsStr::new("wait-streaming"),
                    dir.as_os_str(),
                    OsStr::new(&slot),
                    OsStr::new(&pg_url()),
                ],
            );
        })
    };
    let mut notes = Vec::new();
    // walrelay refusing the files, or dying, is a difference, not an error:
    // Debezium's records are still produced and compared against nothing.
    let mut wr_alive = true;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(&wr_log).unwrap_or_default();
        if text
            .lines()
            .any(|l| l.contains(" streaming ") && l.contains(&slot_w))
        {
            break;
        }
        if let Some(status) = running
            .walrelay
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            let why = text
                .lines()
                .find(|l| l.contains("ERROR"))
                .map(strip_ansi)
                .unwrap_or_default();
            notes.push(Diff::fact(
                "run",
                "stop",
                "streaming",
                &format!("exited with {status} before streaming: {why}"),
            ));
            wr_alive = false;
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "walrelay not streaming after 120 s:\n{}",
                tail(&wr_log, 30)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dbz_wait
        .await
        .map_err(|e| format!("debezium did not start streaming: {e}"))?;

    psql_in(&database, &[OsStr::new("-f"), feed.as_os_str()])?;

    let dbz_log = dbz_dir.join("log");
    match case.end {
        End::Records(n) => {
            // Both reach the count (or walrelay falls short: that is a
            // difference, reported below); then a pause for extra records.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let d = count(&read_all_async(&ctx.dbz_kafka, &token).await);
                let w = count(&read_all_async(&ctx.wr_kafka, &token).await);
                if d >= n && (w >= n || !wr_alive) {
                    break;
                }
                if let Some(status) = running
                    .walrelay
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    if wr_alive {
                        notes.push(Diff::fact(
                            "run",
                            "stop",
                            "kept running",
                            &format!("exited with {status}"),
                        ));
                        wr_alive = false;
                    }
                }
                if Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        End::Fatal(_) => {
            let deadline = Instant::now() + Duration::from_secs(60);
            let (mut dbz_failed, mut wr_exit) = (false, None);
            while Instant::now() < deadline && !(dbz_failed && wr_exit.is_some()) {
                dbz_failed = dbz_failed
                    || std::fs::read_to_string(&dbz_log)
                        .unwrap_or_default()
                        .contains("will not recover until manually restarted");
                if wr_exit.is_none() {
                    wr_exit = running
                        .walrelay
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if !dbz_failed {
                return Err("debezium's task did not fail on the UPDATE within 60 s".into());
            }
            match wr_exit {
                None => notes.push(Diff::fact("run", "stop", "task failed", "kept running")),
                Some(s) if s.success() => notes.push(Diff::fact(
                    "run",
                    "stop",
                    "task failed",
                    &format!("exited successfully ({s})"),
                )),
                Some(_) => {}
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    let dbz = read_all_async(&ctx.dbz_kafka, &token).await;
    let wr = read_all_async(&ctx.wr_kafka, &token).await;
    let expected = match case.end {
        End::Records(n) | End::Fatal(n) => n,
    };
    if count(&dbz) != expected {
        return Err(format!(
            "debezium delivered {} records, the case expects {expected}:\n{}\n--- debezium log ---\n{}",
            count(&dbz),
            describe(&dbz),
            tail(&dbz_log, 40)
        ));
    }
    let mut diffs = notes;
    diffs.extend(compare(&dbz, &wr, case.compare_timestamps));
    if !diffs.is_empty() {
        eprintln!(
            "{}: debezium records:\n{}walrelay records:\n{}--- walrelay log ---\n{}",
            case.name,
            describe(&dbz),
            describe(&wr),
            tail(&wr_log, 30)
        );
    }
    drop(running);
    Ok(diffs)
}

/// A log line without the terminal colour codes tracing writes.
fn strip_ansi(line: &str) -> String {
    let re = regex::Regex::new("\x1b\\[[0-9;]*m").expect("valid regex");
    re.replace_all(line, "").into_owned()
}

fn describe(t: &Topics) -> String {
    let mut s = String::new();
    for ((topic, p), recs) in t {
        for r in recs {
            let _ = writeln!(
                s,
                "  {topic}[{p}]@{} ts={:?} key={} value={} headers={:?}",
                r.offset,
                r.timestamp,
                show(&r.key),
                show(&r.value),
                r.headers
                    .iter()
                    .map(|(k, v)| format!("{k}={}", show(v)))
                    .collect::<Vec<_>>()
            );
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_and_walrelay_produce_identical_records() {
    let only: Option<HashSet<String>> = std::env::var("WALRELAY_COMPAT_CASES")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.split(',').map(|c| c.trim().to_string()).collect());
    let selected: Vec<&'static Case> = CASES
        .iter()
        .filter(|c| only.as_ref().is_none_or(|o| o.contains(c.name)))
        .collect();
    if let Some(o) = &only {
        for name in o {
            assert!(
                CASES.iter().any(|c| c.name == name),
                "WALRELAY_COMPAT_CASES names an unknown case {name}"
            );
        }
    }
    let names: HashSet<&str> = CASES.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), CASES.len(), "two CASES share a name");
    for c in CASES.iter().filter(|c| c.example.is_none()) {
        assert!(
            cases_dir().join(c.name).join("worker.properties").exists(),
            "case {} has no tests/compat/cases/{}/worker.properties",
            c.name,
            c.name
        );
    }
    for k in KNOWN_DIFFERENCES {
        assert!(
            CASES.iter().any(|c| c.name == k.case),
            "KNOWN_DIFFERENCES names an unknown case {}",
            k.case
        );
    }
    let fetch = tokio::task::spawn_blocking(|| run_script("debezium.sh", &["classpath"]));
    let broker = tokio::task::spawn_blocking(PrivateKafka::start);
    let classpath = fetch.await.expect("debezium.sh classpath");
    let plugin_path = classpath
        .lines()
        .find_map(|l| l.strip_prefix("plugin.path="))
        .unwrap_or_else(|| panic!("debezium.sh classpath printed no plugin.path: {classpath}"))
        .to_string();
    let broker = broker.await.expect("private broker starts");
    let ctx = Arc::new(Ctx {
        dbz_kafka: kafka_bootstrap(),
        wr_kafka: broker.bootstrap(),
        pg_port: env().pg_port,
        keep: std::env::var("WALRELAY_COMPAT_KEEP").is_ok_and(|v| v == "1"),
        plugin_path,
    });
    let parallel: usize = std::env::var("WALRELAY_COMPAT_PARALLEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let permits = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let mut tasks = Vec::new();
    for case in selected {
        let (ctx, permits) = (ctx.clone(), permits.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await.expect("semaphore open");
            let outcome = run_case(case, ctx).await;
            eprintln!(
                "{}: {} ({:.0} s)",
                outcome.name,
                match (&outcome.error, outcome.diffs.len()) {
                    (Some(_), _) => "ERROR".to_string(),
                    (None, 0) => "identical".to_string(),
                    (None, n) => format!("{n} difference(s)"),
                },
                outcome.seconds
            );
            outcome
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.expect("case task"));
    }
    drop(broker);

    let mut failures = Vec::new();
    let mut report = String::new();
    for o in &outcomes {
        if let Some(e) = &o.error {
            failures.push(format!("{}: could not be compared: {e}", o.name));
            continue;
        }
        for d in &o.diffs {
            let _ = writeln!(report, "{}: {d}", o.name);
        }
        let known: Vec<&Known> = KNOWN_DIFFERENCES
            .iter()
            .filter(|k| k.case == o.name)
            .collect();
        for k in &known {
            if !o.diffs.iter().any(|d| k.matches(o.name, d)) {
                if k.intermittent {
                    eprintln!(
                        "{}: the intermittent known {} difference did not show this run ({})",
                        o.name, k.field, k.reason
                    );
                    continue;
                }
                failures.push(format!(
                    "{}: KNOWN_DIFFERENCES lists a {} difference (debezium has {:?}, walrelay {:?}: {}) that is gone: remove the entry",
                    o.name, k.field, k.debezium, k.walrelay, k.reason
                ));
            }
        }
        for d in &o.diffs {
            if !known.iter().any(|k| k.matches(o.name, d)) {
                failures.push(format!("{}: {d}", o.name));
            }
        }
    }
    eprintln!("--- all differences ---\n{report}");
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
