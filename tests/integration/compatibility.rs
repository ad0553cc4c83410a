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
//! decode the same transactions) and, on a shared worker, Debezium's
//! connector `name` (below). Topics are created beforehand with 6
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
//! Fatal cases (`End::Fatal`) wait until Connect reports Debezium's task
//! FAILED (REST status) and walrelay has exited, then compare what each
//! delivered before.
//!
//! Debezium's workers. Starting a Kafka Connect worker is most of a case's
//! time (about 12 s of JVM start-up before the connector even starts), so
//! cases whose Debezium worker file reads the same after substitution share
//! one long-lived standalone worker (`debezium.sh standalone DIR WORKER`
//! with no connector file), started by the first case that needs it and
//! stopped after the last ([`run_all`]; drop guards stop it on a panic, and
//! the script's watchdog if this process dies). Each case adds its connector
//! through Connect's REST API (`PUT /connectors/<name>/config`), waits until
//! the slot is active and the connector's task logged Debezium's
//! "Processing messages" (log lines carry Connect's `[<name>|task-0]`
//! context), watches `GET /connectors/<name>/status` for a FAILED connector
//! or task, and deletes the connector afterwards (`DELETE`, which stops the
//! task and frees the slot) before dropping its slots. What the worker got
//! is the case's files unchanged but for the connector's `name`, made unique
//! per case (Connect's name reaches no record: `__debezium.context.connectorName`
//! is the connector type, and walrelay's files keep the old name, so the
//! comparison would show it). The connector file is read here only where
//! the reading is beyond doubt (`key=value` ASCII properties, JSON of
//! strings; [`simple_properties`], [`json_connector`]); any other file gets a
//! worker of its own started with the file, so Java reads it, as before.
//! Debezium names its JMX beans after `topic.prefix`, so two cases with the
//! same prefix never run on one worker at once; the scheduler runs the
//! longest work first (such chains, and cases that start a worker). A
//! worker that dies fails its cases with the end of its log. Each case's
//! `debezium/log` holds its connector's lines of the worker's log; the workers' own directories (`walrelay-compat-workers-*`:
//! worker file, log, offsets) are kept with `WALRELAY_COMPAT_KEEP=1` or
//! when the suite fails.
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
//! `WALRELAY_COMPAT_PARALLEL` sets how many cases run at once (default 4),
//! `WALRELAY_COMPAT_KEEP=1` keeps every case's files and logs and the
//! workers' directories.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
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

/// The topics of the `smt-chain-schemas` case (RegexRouter after the router).
const SMT_TOPICS: &[(&str, i32)] = &[("smt.U_@AGG@", PARTITIONS), ("smt.V_@AGG@", PARTITIONS)];
/// The topics of the `smt-chain-noschemas` case (TimestampRouter).
const SMT_COPY_TOPICS: &[(&str, i32)] = &[
    ("outbox.event.U_@AGG@.copy", PARTITIONS),
    ("outbox.event.V_@AGG@.copy", PARTITIONS),
];

/// The matrix. Record counts are what Debezium 3.6.1 delivered.
const CASES: &[Case] = &[
    // Kafka Connect's transforms after the router: a chain of six with a
    // predicate on the renamed topic (the V_ record is filtered out), one
    // with headers copied, added and dropped under a negated predicate,
    // and one whose transform fails at the first event.
    with_topics(case("smt-chain-schemas", End::Records(5)), SMT_TOPICS),
    with_topics(
        case("smt-chain-noschemas", End::Records(6)),
        SMT_COPY_TOPICS,
    ),
    // The same chains under the other converter setting.
    with_topics(
        case("smt-chain-schemas-noschemas", End::Records(5)),
        SMT_TOPICS,
    ),
    with_topics(
        case("smt-chain-noschemas-withschemas", End::Records(6)),
        SMT_COPY_TOPICS,
    ),
    case("smt-fail", End::Fatal(0)),
    // Expanded payloads reshaped by seven transforms (Flatten, Cast,
    // MaskField, ReplaceField, TimestampConverter, ValueToKey,
    // ExtractField) and a header parsed from a literal, with and without
    // schemas; a cast that cannot be made stops both at the same event; a
    // tombstone (no schema) hoisted into a schemaless map.
    with_sql(
        case("smt-expand-schemas", End::Records(3)),
        "outbox.sql",
        "smt-feed.sql",
    ),
    with_sql(
        case("smt-expand-noschemas", End::Records(3)),
        "outbox.sql",
        "smt-feed.sql",
    ),
    with_sql(
        case("smt-fail-cast", End::Fatal(1)),
        "outbox.sql",
        "smt-fail-cast-feed.sql",
    ),
    case("smt-tombstone", End::Records(6)),
    // Debezium's transforms after the router: HeaderToValue moves headers
    // into the expanded payload, PartitionRouting and ActivateTracingSpan
    // pass the router's records; EnforceRecordSize fails on them (it casts
    // the text key to a struct).
    with_sql(
        case("dbz-header-to-value", End::Records(3)),
        "outbox.sql",
        "smt-feed.sql",
    ),
    with_sql(
        case("dbz-enforce-size", End::Fatal(0)),
        "outbox.sql",
        "smt-feed.sql",
    ),
    // Debezium's CloudEvents converter behind the EventRouter, its metadata
    // copied into headers by a HeaderFrom before the router (Debezium's
    // documented outbox set-up), `data` with and without its schema. A
    // database of their own: `source.sequence` names the last commit each
    // relay decoded, and in the shared one other tests' messages bring
    // commits only the relay that started first sees.
    Case {
        database: Database::Private,
        ..with_sql(
            case("ce-outbox-schemas", End::Records(3)),
            "outbox.sql",
            "smt-feed.sql",
        )
    },
    Case {
        database: Database::Private,
        ..with_sql(
            case("ce-outbox-noschemas", End::Records(3)),
            "outbox.sql",
            "smt-feed.sql",
        )
    },
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
    // In a database of its own: its key converter (ByteArrayConverter)
    // fails Debezium's task on the struct key of a `test.message` record,
    // which any other test's logical decoding message in the shared
    // database brings.
    Case {
        database: Database::Private,
        ..with_topics(
            with_sql(
                case("bytea-binary", End::Records(4)),
                "bytea.sql",
                "bytea-feed.sql",
            ),
            BYTEA_TOPICS,
        )
    },
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
    // numeric NaN and ±Infinity under the default precise mode (issue 31):
    // Debezium keeps streaming.
    types_case(
        "types-num-precise-special",
        End::Records(6),
        "types-num.sql",
        "types-num-special-feed.sql",
    ),
    // timetz (and time) at 24:00 under the modes that read it as a Java
    // time (issue 31).
    // The same values as the payload and the key (payload c_n, key c_nd:
    // a NOT NULL column with a default).
    types_case(
        "types-num-precise-payload",
        End::Records(6),
        "types-num.sql",
        "types-num-special-feed.sql",
    ),
    // NaN in a NOT NULL column without a default: nothing stands in, and
    // both stop on it ("Invalid value: null used for required field").
    types_case(
        "types-num-precise-required",
        End::Fatal(0),
        "types-num-required.sql",
        "types-num-required-feed.sql",
    ),
    // The same column placed nowhere: Debezium's change event still
    // carries it, and still fails.
    types_case(
        "types-num-precise-required-unplaced",
        End::Fatal(0),
        "types-num-required.sql",
        "types-num-required-feed.sql",
    ),
    types_case(
        "types-timetz24-payload",
        End::Records(4),
        "types-time.sql",
        "types-timetz24-feed.sql",
    ),
    types_case(
        "types-timetz24-adaptive",
        End::Records(4),
        "types-time.sql",
        "types-timetz24-feed.sql",
    ),
    types_case(
        "types-timetz24-connect",
        End::Records(4),
        "types-time.sql",
        "types-timetz24-feed.sql",
    ),
    types_case(
        "types-timetz24-micro",
        End::Records(4),
        "types-time.sql",
        "types-timetz24-feed.sql",
    ),
    types_case(
        "types-timetz24-iso",
        End::Records(4),
        "types-time.sql",
        "types-timetz24-feed.sql",
    ),
    types_case(
        "types-timetz24-nano",
        End::Records(4),
        "types-time.sql",
        "types-timetz24-feed.sql",
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
    // Several outbox tables in one table.include.list (tables.sql, three
    // tables of one shape), written in interleaved transactions, one
    // aggregate's events from several tables into one topic: one
    // EventRouter routes every table's change events. In a database of
    // its own, whose drop removes the tables.
    Case {
        database: Database::Private,
        ..with_sql(
            case("tables", End::Records(12)),
            "tables.sql",
            "tables-feed.sql",
        )
    },
    // With an envelope field: the EventRouter's envelope schema cache is
    // keyed by the payload schema, so the first table (and route value)
    // seen names the envelope of every table's records.
    Case {
        database: Database::Private,
        ..with_sql(
            case("tables-envelope", End::Records(12)),
            "tables.sql",
            "tables-feed.sql",
        )
    },
    // snapshot.mode=initial over the three tables (listed c, a, b), two
    // rows each already there, one aggregate on one topic: the order in
    // which the tables' rows are published is compared too.
    Case {
        database: Database::Private,
        ..with_sql(
            case("tables-snapshot", End::Records(18)),
            "tables-snapshot.sql",
            "tables-feed.sql",
        )
    },
    // Transaction metadata over the three tables: the END record counts
    // each table as its data collection.
    txmeta(
        "tables-txmeta",
        22,
        "tables.sql",
        "tables-feed.sql",
        TXMETA_TOPICS,
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
pub(crate) fn psql_in(database: &str, args: &[&OsStr]) -> Result<String, String> {
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

pub(crate) fn psql_c(sql: &str) -> Result<String, String> {
    psql(&[OsStr::new("-c"), OsStr::new(sql)])
}

pub(crate) fn substitute<V: AsRef<str>>(text: &str, vars: &[(&str, V)]) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out.replace(k, v.as_ref());
    }
    out
}

/// A case's processes and database objects; removed on drop, panics or not.
struct Running {
    /// Debezium's connector: deleted (its task stops and lets go of the
    /// slot), its lines of the worker's log copied to `dbz_log`.
    connector: Option<Connector>,
    dbz_log: PathBuf,
    walrelay: Option<Child>,
    slots: Vec<String>,
    table: String,
    /// A private database to drop last (after the slots on it).
    database: Option<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Blocking work (a DELETE waits for the task to stop): off the
        // runtime's threads when there is one.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.clean_up());
            }
            _ => self.clean_up(),
        }
    }
}

impl Running {
    fn clean_up(&mut self) {
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
        if let Some(c) = self.connector.take() {
            if c.worker.alive() {
                match rest(
                    c.worker.port,
                    "DELETE",
                    &format!("/connectors/{}", c.name),
                    None,
                ) {
                    Ok((204 | 200, _)) => {}
                    Ok((status, body)) => {
                        eprintln!("warning: DELETE connector {}: {status} {body}", c.name);
                    }
                    Err(e) => eprintln!("warning: DELETE connector {}: {e}", c.name),
                }
            }
            let text = format!(
                "# The lines of connector {} in {}\n{}",
                c.name,
                c.worker.log().display(),
                c.log()
            );
            if let Err(e) = std::fs::write(&self.dbz_log, text) {
                eprintln!("warning: write {}: {e}", self.dbz_log.display());
            }
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
            Some(Err(e)) if crate::common::transient(&e) => {}
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
    for ((topic, _), recs) in &mut topics {
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
    for ((topic, _), recs) in &mut topics {
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
pub(crate) fn show(b: &Option<Vec<u8>>) -> String {
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
pub(crate) fn mask_uuid(b: &Option<Vec<u8>>) -> Option<String> {
    let s = String::from_utf8_lossy(b.as_deref()?).into_owned();
    let re = regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("valid regex");
    Some(re.replace_all(&s, "<uuid>").into_owned())
}

/// One difference between the relays' output.
#[derive(Debug, Clone)]
pub(crate) struct Diff {
    /// Where: `topic[partition]#index`, or `run` for the relay processes.
    pub(crate) at: String,
    /// What: `key`, `value`, `timestamp`, `header names`, `header <name>`,
    /// `record count`, `missing in walrelay`, `extra in walrelay`, `stop`.
    pub(crate) field: String,
    /// Debezium's bytes (UTF-8, lossy) or fact.
    pub(crate) debezium: Option<Vec<u8>>,
    /// walrelay's bytes or fact.
    pub(crate) walrelay: Option<Vec<u8>>,
}

impl Diff {
    pub(crate) fn new(
        at: &str,
        field: &str,
        debezium: Option<&[u8]>,
        walrelay: Option<&[u8]>,
    ) -> Diff {
        Diff {
            at: at.to_string(),
            field: field.to_string(),
            debezium: debezium.map(<[u8]>::to_vec),
            walrelay: walrelay.map(<[u8]>::to_vec),
        }
    }

    pub(crate) fn fact(at: &str, field: &str, debezium: &str, walrelay: &str) -> Diff {
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
pub(crate) struct Known {
    pub(crate) case: &'static str,
    pub(crate) field: &'static str,
    pub(crate) debezium: &'static str,
    pub(crate) walrelay: &'static str,
    pub(crate) reason: &'static str,
    /// A race decides whether it shows: its absence is reported, not failed.
    /// Only for differences that depend on timing, each with the race
    /// explained.
    pub(crate) intermittent: bool,
}

impl Known {
    pub(crate) fn matches(&self, case: &str, d: &Diff) -> bool {
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

pub(crate) fn file_text(path: &Path) -> String {
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

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The line Debezium's PostgreSQL connector logs once `START_REPLICATION`
/// is out (the slot is already active while it waits for a consistent
/// point, and what commits before that point is never decoded).
const STREAMING_LINE: &str =
    "Processing messages (io.debezium.connector.postgresql.PostgresStreamingChangeEventSource)";
/// How long a worker has to answer on REST, and a connector to stream.
const WORKER_START: Duration = Duration::from_secs(180);
const CONNECTOR_START: Duration = Duration::from_secs(120);

/// One request to a worker's REST API: HTTP/1.0 on loopback, so one
/// connection per request and the body runs to EOF. Blocking.
fn rest(port: u16, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let what = format!("{method} http://127.0.0.1:{port}{path}");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("{what}: {e}"))?;
    // Connect answers within its own request timeout (90 s).
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| format!("{what}: {e}"))?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("{what}: {e}"))?;
    let mut response = Vec::new();
    s.read_to_end(&mut response)
        .map_err(|e| format!("{what}: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{what}: not an HTTP response: {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{what}: no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// [`rest`] off the runtime's threads (a DELETE waits for the task to stop).
async fn rest_async(
    port: u16,
    method: &'static str,
    path: String,
    body: Option<String>,
) -> Result<(u16, String), String> {
    tokio::task::spawn_blocking(move || rest(port, method, &path, body.as_deref()))
        .await
        .map_err(|e| format!("REST call panicked: {e}"))?
}

/// A connector `.properties` file as `java.util.Properties` reads it, for
/// the subset whose reading is beyond doubt: ASCII, `key=value` lines,
/// `#`/`!` comments and blank lines. Anything else (a backslash escape or
/// continuation, a `:` or blank separator, a lone CR, non-ASCII bytes, which
/// Java reads as ISO-8859-1) gives None: the case then gets a worker of its
/// own started with the file, so Java's reading of it stays the reference.
fn simple_properties(text: &str) -> Option<BTreeMap<String, String>> {
    if !text.is_ascii() || text.contains('\\') {
        return None;
    }
    let text = text.replace("\r\n", "\n");
    if text.contains('\r') {
        return None;
    }
    let blank = |c: char| matches!(c, ' ' | '\t' | '\x0c');
    let mut out = BTreeMap::new();
    for line in text.split('\n') {
        let line = line.trim_start_matches(blank);
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let end = line.find(|c: char| c == '=' || c == ':' || blank(c))?;
        if end == 0 || !line[end..].starts_with('=') {
            return None;
        }
        let value = line[end + 1..].trim_start_matches(blank);
        out.insert(line[..end].to_string(), value.to_string());
    }
    Some(out)
}

/// A connector `.json` file as ConnectStandalone reads it: a flat object of
/// strings with `name`, or the REST form `{"name", "config"}`. Anything else
/// (numbers or booleans Jackson would turn into text, `initial_state`, a
/// `config.name` that differs) gives None, as [`simple_properties`] does.
fn json_connector(text: &str) -> Option<BTreeMap<String, String>> {
    use serde_json::{Map, Value};
    let strings = |o: &Map<String, Value>| -> Option<BTreeMap<String, String>> {
        o.iter()
            .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect()
    };
    let value: Value = serde_json::from_str(text).ok()?;
    let object = value.as_object()?;
    if let Some(flat) = strings(object) {
        return flat.contains_key("name").then_some(flat);
    }
    if object.keys().any(|k| k != "name" && k != "config") {
        return None;
    }
    let name = object.get("name")?.as_str()?.to_string();
    let mut config = strings(object.get("config")?.as_object()?)?;
    if config.get("name").is_some_and(|n| *n != name) {
        return None;
    }
    config.insert("name".into(), name);
    Some(config)
}

/// A Kafka Connect standalone worker started by `debezium.sh standalone`;
/// stopped on drop (and by the script's watchdog if this process dies).
struct Worker {
    dir: PathBuf,
    port: u16,
    pid: u32,
}

impl Worker {
    /// Starts a worker in `dir` from the worker file `worker` and the
    /// connector files `connectors` (none: connectors come through REST),
    /// and waits until its REST API answers. Blocking.
    fn start(dir: &Path, worker: &Path, connectors: &[PathBuf]) -> Result<Worker, String> {
        let t0 = Instant::now();
        for attempt in 1.. {
            let out = Command::new(repo().join("scripts/debezium.sh"))
                .arg("standalone")
                .arg(dir)
                .arg(worker)
                .args(connectors)
                .env("WALRELAY_OWNER_PID", std::process::id().to_string())
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run debezium.sh: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "debezium.sh standalone {} failed ({}):\n{}",
                    dir.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let read = |f: &str| -> Result<String, String> {
                std::fs::read_to_string(dir.join(f))
                    .map(|s| s.trim().to_string())
                    .map_err(|e| format!("read {}/{f}: {e}", dir.display()))
            };
            let number = |f: &str| -> Result<u64, String> {
                let text = read(f)?;
                text.parse()
                    .map_err(|_| format!("{}/{f} holds no number: {text:?}", dir.display()))
            };
            let w = Worker {
                dir: dir.to_path_buf(),
                port: number("rest_port")? as u16,
                pid: number("pid")? as u32,
            };
            let deadline = Instant::now() + WORKER_START;
            loop {
                if !w.alive() {
                    let log = w.log_tail(40);
                    // debezium.sh picks a free port; another process may take
                    // it before Jetty binds.
                    if log.contains("Address already in use") && attempt < 3 {
                        break;
                    }
                    return Err(format!(
                        "the Debezium worker in {} exited before its REST API answered:\n{log}",
                        dir.display()
                    ));
                }
                if let Ok((200, body)) = rest(w.port, "GET", "/connectors", None) {
                    // A worker started with connector files has created them
                    // (or exited) before it lists them.
                    if connectors.is_empty() || body.trim() != "[]" {
                        eprintln!(
                            "debezium worker {} ready in {:.0} s",
                            dir.display(),
                            t0.elapsed().as_secs_f64()
                        );
                        return Ok(w);
                    }
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "the Debezium worker in {} did not answer on REST within {} s:\n{}",
                        dir.display(),
                        WORKER_START.as_secs(),
                        w.log_tail(40)
                    ));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
        unreachable!("the start loop returns")
    }

    /// The JVM still runs (the pid is not recycled: its command line names
    /// this worker's file, as `debezium.sh status` checks).
    fn alive(&self) -> bool {
        let file = format!("{}/worker.properties", self.dir.display());
        std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&file))
    }

    fn log(&self) -> PathBuf {
        self.dir.join("log")
    }

    fn log_len(&self) -> u64 {
        std::fs::metadata(self.log()).map(|m| m.len()).unwrap_or(0)
    }

    /// The log from byte `offset` on.
    fn log_since(&self, offset: u64) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = Vec::new();
        if let Ok(mut f) = std::fs::File::open(self.log()) {
            if f.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = f.read_to_end(&mut text);
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    fn log_tail(&self, lines: usize) -> String {
        tail(&self.log(), lines)
    }

    /// An error unless the JVM runs, with the end of its log.
    fn check_alive(&self) -> Result<(), String> {
        if self.alive() {
            return Ok(());
        }
        Err(format!(
            "the Debezium worker in {} (pid {}) died; the end of its log:\n{}",
            self.dir.display(),
            self.pid,
            self.log_tail(40)
        ))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/debezium.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
    }
}

/// A worker shared by cases: started by the first case that needs it.
type WorkerCell = Arc<tokio::sync::OnceCell<Result<Arc<Worker>, String>>>;

/// Where a case's worker comes from.
#[derive(Clone)]
struct WorkerSlot {
    cell: WorkerCell,
    /// The worker's directory; its worker file sits next to it.
    dir: PathBuf,
}

/// A case's connector on a worker.
struct Connector {
    worker: Arc<Worker>,
    name: String,
    /// Where the worker's log stood when the connector was created.
    log_from: u64,
}

impl Connector {
    /// The worker's log since the connector was created, cut to the lines
    /// of this connector (its context `[NAME|...]` or its name) and the
    /// lines that continue them (stack traces, multi-line config dumps).
    fn log(&self) -> String {
        let text = self.worker.log_since(self.log_from);
        let mut out = String::new();
        let mut keep = false;
        for line in text.lines() {
            if line.starts_with('[') {
                keep = line.contains(&self.name);
            }
            if keep {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = self.log();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The trace of the connector or its task if Connect reports it FAILED.
    async fn failure(&self) -> Result<Option<String>, String> {
        self.worker.check_alive()?;
        let (status, body) = rest_async(
            self.worker.port,
            "GET",
            format!("/connectors/{}/status", self.name),
            None,
        )
        .await?;
        if status != 200 {
            // Not listed yet, or the worker is busy: ask again.
            return Ok(None);
        }
        let v: serde_json::Value = serde_json::from_str(&body)
            .map_err(|e| format!("status of {}: {e}: {body}", self.name))?;
        let states =
            std::iter::once(&v["connector"]).chain(v["tasks"].as_array().into_iter().flatten());
        for s in states {
            if s["state"] == "FAILED" {
                return Ok(Some(
                    s["trace"].as_str().unwrap_or("(no trace)").to_string(),
                ));
            }
        }
        Ok(None)
    }

    /// Waits until the connector streams from `slot`: the slot is active and
    /// the connector's task logged [`STREAMING_LINE`]; a FAILED status or a
    /// dead worker ends the wait.
    async fn wait_streaming(&self, slot: &str) -> Result<(), String> {
        let deadline = Instant::now() + CONNECTOR_START;
        let line = format!("|task-0] {STREAMING_LINE}");
        let context = format!("[{}|", self.name);
        loop {
            if let Some(trace) = self.failure().await? {
                return Err(format!(
                    "Debezium's connector {} failed before streaming:\n{trace}\n--- its log ---\n{}",
                    self.name,
                    self.log_tail(40)
                ));
            }
            let active = psql_c(&format!(
                "select active from pg_replication_slots where slot_name = '{slot}'"
            ))
            .unwrap_or_default();
            let active = active.trim();
            if active == "t"
                && self
                    .worker
                    .log_since(self.log_from)
                    .lines()
                    .any(|l| l.contains(&context) && l.contains(&line))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "Debezium's connector {} was not streaming from slot {slot} within {} s (slot active: {:?}):\n{}",
                    self.name,
                    CONNECTOR_START.as_secs(),
                    if active.is_empty() { "absent" } else { active },
                    self.log_tail(40)
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Gets the case's worker (starting it if it is the first case of its
/// worker file) and creates the case's connector on it.
async fn start_connector(
    plan: Arc<Plan>,
    slot: WorkerSlot,
    input: PathBuf,
) -> Result<Connector, String> {
    let shared = plan.rest.is_some();
    let init = || async {
        let (dir, worker_file) = (slot.dir.clone(), slot.dir.with_extension("properties"));
        std::fs::write(&worker_file, &plan.dbz_worker)
            .map_err(|e| format!("write {}: {e}", worker_file.display()))?;
        let connectors = if shared {
            Vec::new()
        } else {
            vec![input.join(&plan.conn_name)]
        };
        tokio::task::spawn_blocking(move || Worker::start(&dir, &worker_file, &connectors))
            .await
            .map_err(|e| format!("worker start panicked: {e}"))?
            .map(Arc::new)
    };
    let worker = slot.cell.get_or_init(init).await.clone()?;
    worker.check_alive()?;
    match &plan.rest {
        Some(config) => {
            let name = config["name"].clone();
            let log_from = worker.log_len();
            let body = serde_json::to_string(config).expect("a map of strings serializes");
            let (status, answer) = rest_async(
                worker.port,
                "PUT",
                format!("/connectors/{name}/config"),
                Some(body),
            )
            .await?;
            let connector = Connector {
                worker,
                name,
                log_from,
            };
            if status != 201 {
                return Err(format!(
                    "the Debezium worker refused connector {} ({status}): {answer}\n--- its log ---\n{}",
                    connector.name,
                    connector.log_tail(40)
                ));
            }
            Ok(connector)
        }
        None => {
            let (_, listed) = rest_async(worker.port, "GET", "/connectors".into(), None).await?;
            let names: Vec<String> = serde_json::from_str(&listed)
                .map_err(|e| format!("GET /connectors: {e}: {listed}"))?;
            let [name] = <[String; 1]>::try_from(names)
                .map_err(|n| format!("the worker started with one connector file lists {n:?}"))?;
            Ok(Connector {
                worker,
                name,
                log_from: 0,
            })
        }
    }
}

/// A case prepared for a run: its token and files, and what decides which
/// worker it runs on and what it may run beside.
struct Plan {
    case: &'static Case,
    token: String,
    /// `@DB@`: where setup and feed run.
    database: String,
    worker_tpl: String,
    conn_tpl: String,
    conn_name: OsString,
    /// Debezium's worker file as written: cases whose text is the same
    /// share one worker.
    dbz_worker: String,
    /// Debezium's connector as the REST API gets it, `name` made unique, or
    /// None for a file [`simple_properties`] or [`json_connector`] leave to
    /// Java: that case gets a worker of its own started with the file.
    rest: Option<BTreeMap<String, String>>,
    /// Its `topic.prefix`: Debezium names its JMX beans after it, so two
    /// connectors with the same one never run on a worker at once (the
    /// second would wait for the first's beans, 5 s at a time).
    prefix: String,
}

impl Plan {
    fn new(case: &'static Case, ctx: &Ctx) -> Plan {
        let token = unique_name(&case.name.replace('-', "_"));
        let database = match case.database {
            Database::Shared => "postgres".to_string(),
            Database::Private => token.clone(),
        };
        let src = cases_dir().join(case.name);
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
        let mut plan = Plan {
            case,
            token,
            database,
            worker_tpl,
            conn_tpl,
            conn_name,
            dbz_worker: String::new(),
            rest: None,
            prefix: String::new(),
        };
        let vars = plan.vars(ctx, true);
        plan.dbz_worker = substitute(&plan.worker_tpl, &vars);
        let connector = substitute(&plan.conn_tpl, &vars);
        plan.rest = if Path::new(&plan.conn_name).extension() == Some(OsStr::new("json")) {
            json_connector(&connector)
        } else {
            simple_properties(&connector).filter(|c| c.contains_key("name"))
        };
        if let Some(config) = &mut plan.rest {
            plan.prefix = config.get("topic.prefix").cloned().unwrap_or_default();
            // Connect's connector name reaches no record (the records
            // compared against walrelay's, whose files keep the name, show it).
            config.insert("name".into(), plan.token.clone());
        }
        plan
    }

    /// The placeholders of Debezium's files (`debezium`) or walrelay's.
    fn vars(&self, ctx: &Ctx, debezium: bool) -> Vec<(&'static str, String)> {
        let (bootstrap, slot) = if debezium {
            (&ctx.dbz_kafka, format!("{}_d", self.token))
        } else {
            (&ctx.wr_kafka, format!("{}_w", self.token))
        };
        vec![
            ("@BOOTSTRAP@", bootstrap.clone()),
            ("@PGPORT@", ctx.pg_port.to_string()),
            ("@SLOT@", slot),
            ("@TABLE@", self.token.clone()),
            ("@AGG@", self.token.clone()),
            ("@DB@", self.database.clone()),
        ]
    }

    /// Cases with the same key share a worker.
    fn worker_key(&self) -> String {
        match self.rest {
            Some(_) => self.dbz_worker.clone(),
            None => format!("the worker of {} alone", self.case.name),
        }
    }
}

async fn run_case(plan: Arc<Plan>, ctx: Arc<Ctx>, slot: WorkerSlot) -> Outcome {
    let case = plan.case;
    let t0 = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&format!("walrelay-compat-{}-", case.name))
        .tempdir()
        .expect("create a temporary directory");
    let result = tokio::spawn(run_case_in(
        plan,
        ctx.clone(),
        slot,
        work.path().to_path_buf(),
    ))
    .await;
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
    plan: Arc<Plan>,
    ctx: Arc<Ctx>,
    slot: WorkerSlot,
    work: PathBuf,
) -> Result<Vec<Diff>, String> {
    let case = plan.case;
    let token = plan.token.clone();
    let (slot_d, slot_w) = (format!("{token}_d"), format!("{token}_w"));
    let database = plan.database.clone();
    let src = cases_dir().join(case.name);
    let conn_name = plan.conn_name.clone();
    let dbz_vars = plan.vars(&ctx, true);
    let wr_vars = plan.vars(&ctx, false);
    let (dbz_in, wr_in) = (work.join("debezium-input"), work.join("walrelay"));
    std::fs::create_dir_all(&dbz_in).expect("mkdir");
    std::fs::create_dir_all(work.join("debezium")).expect("mkdir");
    std::fs::create_dir_all(&wr_in).expect("mkdir");
    let write = |text: &str, to: &Path, vars: &[(&str, String)]| {
        std::fs::write(to, substitute(text, vars))
            .unwrap_or_else(|e| panic!("write {}: {e}", to.display()));
    };
    // Debezium's files as written, for the record; a shared worker got its
    // worker file from the first case and this connector through REST.
    write(
        &plan.worker_tpl,
        &dbz_in.join("worker.properties"),
        &dbz_vars,
    );
    write(&plan.conn_tpl, &dbz_in.join(&conn_name), &dbz_vars);
    if let Some(config) = &plan.rest {
        std::fs::write(
            dbz_in.join("connector-rest.json"),
            serde_json::to_string_pretty(config).expect("a map of strings serializes"),
        )
        .expect("write connector-rest.json");
    }
    match case.mode {
        Mode::ConnectStandalone => {
            write(&plan.worker_tpl, &wr_in.join("worker.properties"), &wr_vars);
            write(&plan.conn_tpl, &wr_in.join(&conn_name), &wr_vars);
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
    let mut running = Running {
        connector: None,
        dbz_log: work.join("debezium/log"),
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
    let dbz_start = tokio::spawn(start_connector(plan.clone(), slot, dbz_in.clone()));
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
    let spawned = cmd.spawn().map_err(|e| format!("spawn walrelay: {e}"));
    // Awaited before anything can fail, so the drop guard knows to delete it.
    let started = dbz_start
        .await
        .map_err(|e| format!("starting Debezium's connector panicked: {e}"));
    let spawn_error = match spawned {
        Ok(child) => {
            running.walrelay = Some(child);
            None
        }
        Err(e) => Some(e),
    };
    running.connector = Some(started??);
    if let Some(e) = spawn_error {
        return Err(e);
    }
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
    let dbz = running.connector.as_ref().expect("set above");
    dbz.wait_streaming(&slot_d).await?;

    psql_in(&database, &[OsStr::new("-f"), feed.as_os_str()])?;

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
                dbz.worker.check_alive()?;
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
                // Connect reports the task FAILED (the worker keeps running).
                dbz_failed = dbz_failed || dbz.failure().await?.is_some();
                if wr_exit.is_none() {
                    wr_exit = running
                        .walrelay
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if !dbz_failed {
                return Err(format!(
                    "Debezium's task did not fail within 60 s:\n--- its log ---\n{}",
                    dbz.log_tail(40)
                ));
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
    let dbz_topics = read_all_async(&ctx.dbz_kafka, &token).await;
    let wr = read_all_async(&ctx.wr_kafka, &token).await;
    let expected = match case.end {
        End::Records(n) | End::Fatal(n) => n,
    };
    if count(&dbz_topics) != expected {
        return Err(format!(
            "debezium delivered {} records, the case expects {expected}:\n{}\n--- debezium log ---\n{}",
            count(&dbz_topics),
            describe(&dbz_topics),
            dbz.log_tail(40)
        ));
    }
    let mut diffs = notes;
    diffs.extend(compare(&dbz_topics, &wr, case.compare_timestamps));
    if !diffs.is_empty() {
        eprintln!(
            "{}: debezium records:\n{}walrelay records:\n{}--- walrelay log ---\n{}",
            case.name,
            describe(&dbz_topics),
            describe(&wr),
            tail(&wr_log, 30)
        );
    }
    drop(running);
    Ok(diffs)
}

/// A log line without the terminal colour codes tracing writes.
pub(crate) fn strip_ansi(line: &str) -> String {
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

/// Runs the cases, `parallel` at a time, on as few Debezium workers as
/// their worker files allow: one per distinct text, started by the first
/// case that needs it and stopped after the last. Returns the outcomes in
/// the order of `plans` and the directory of the workers' files and logs.
async fn run_all(
    plans: &[Arc<Plan>],
    ctx: &Arc<Ctx>,
    parallel: usize,
) -> (Vec<Outcome>, tempfile::TempDir) {
    struct Shared {
        slot: WorkerSlot,
        /// Cases not finished yet.
        remaining: usize,
        used: bool,
    }
    let root = tempfile::Builder::new()
        .prefix("walrelay-compat-workers-")
        .tempdir()
        .expect("create a temporary directory");
    let keys: Vec<String> = plans.iter().map(|p| p.worker_key()).collect();
    let mut workers: HashMap<String, Shared> = HashMap::new();
    for (p, key) in plans.iter().zip(&keys) {
        let n = workers.len();
        workers
            .entry(key.clone())
            .or_insert_with(|| Shared {
                slot: WorkerSlot {
                    cell: Arc::default(),
                    dir: root.path().join(format!("w{n}-{}", p.case.name)),
                },
                remaining: 0,
                used: false,
            })
            .remaining += 1;
    }
    eprintln!(
        "{} case(s) on {} Debezium worker(s), {parallel} at a time",
        plans.len(),
        workers.len()
    );
    // Cases of one worker with one topic.prefix run one after another.
    // Longest work first: a chain of such cases weighs WARM each, a case
    // whose worker nobody has started yet COLD more (the JVM start; about
    // the seconds each took on 2 busy cores); ties go by the order of CASES.
    const WARM: usize = 10;
    const COLD: usize = 30;
    let lane = |i: usize| (keys[i].clone(), plans[i].prefix.clone());
    let mut pending: Vec<usize> = (0..plans.len()).collect();
    let mut busy: HashSet<(String, String)> = HashSet::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut outcomes: Vec<Option<Outcome>> = plans.iter().map(|_| None).collect();
    let mut stops = Vec::new();
    loop {
        while tasks.len() < parallel {
            let best = pending
                .iter()
                .enumerate()
                .filter(|(_, &i)| !busy.contains(&lane(i)))
                .max_by_key(|(pos, &i)| {
                    let chain = pending.iter().filter(|&&j| lane(j) == lane(i)).count();
                    let cold = if workers[&keys[i]].used { 0 } else { COLD };
                    (chain * WARM + cold, std::cmp::Reverse(*pos))
                })
                .map(|(pos, &i)| (pos, i));
            let Some((pos, i)) = best else { break };
            pending.remove(pos);
            busy.insert(lane(i));
            let shared = workers.get_mut(&keys[i]).expect("every key has a worker");
            shared.used = true;
            let (plan, ctx, slot) = (plans[i].clone(), ctx.clone(), shared.slot.clone());
            tasks.spawn(async move {
                let outcome = run_case(plan, ctx, slot).await;
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
                (i, outcome)
            });
        }
        let Some(joined) = tasks.join_next().await else {
            break;
        };
        let (i, outcome) = joined.expect("case task");
        outcomes[i] = Some(outcome);
        busy.remove(&lane(i));
        let shared = workers.get_mut(&keys[i]).expect("every key has a worker");
        shared.remaining -= 1;
        if shared.remaining == 0 {
            // Its last case is done: stop the JVM (blocking, off the runtime).
            let done = workers.remove(&keys[i]).expect("present");
            stops.push(tokio::task::spawn_blocking(move || drop(done.slot)));
        }
    }
    for stop in stops {
        stop.await.expect("worker stop");
    }
    let outcomes = outcomes
        .into_iter()
        .map(|o| o.expect("every case ran"))
        .collect();
    (outcomes, root)
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
        .unwrap_or(4)
        .max(1);
    let t0 = Instant::now();
    let plans: Vec<Arc<Plan>> = selected
        .iter()
        .map(|c| Arc::new(Plan::new(c, &ctx)))
        .collect();
    let (outcomes, workers_root) = run_all(&plans, &ctx, parallel).await;
    drop(broker);
    eprintln!(
        "--- {} case(s) in {:.0} s, {parallel} at a time ---",
        outcomes.len(),
        t0.elapsed().as_secs_f64()
    );

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
    if ctx.keep || !failures.is_empty() {
        let kept = workers_root.keep();
        eprintln!(
            "Debezium workers' files and logs kept in {}",
            kept.display()
        );
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Connector files are read here only where the reading is beyond doubt;
/// everything else is left to Java (a worker of its own).
#[test]
fn connector_files_read_here_or_left_to_java() {
    let props = simple_properties("# c\n! c\n\n  name=\t a b \r\nk=\nx=y=z\n").expect("simple");
    assert_eq!(props["name"], "a b ");
    assert_eq!(props["k"], "");
    assert_eq!(props["x"], "y=z");
    for doubtful in [
        "a\\\n=b",
        "a:b",
        "a b",
        "a = b",
        "a\n=b",
        "flag",
        "a=\\u0041",
        "a=\u{e9}",
        "a=b\rc=d",
    ] {
        assert_eq!(simple_properties(doubtful), None, "{doubtful:?}");
    }
    let flat = json_connector(r#"{"name": "n", "k": "v"}"#).expect("flat");
    assert_eq!((flat["name"].as_str(), flat["k"].as_str()), ("n", "v"));
    let rest = json_connector(r#"{"name": "n", "config": {"k": "v"}}"#).expect("REST form");
    assert_eq!((rest["name"].as_str(), rest["k"].as_str()), ("n", "v"));
    for doubtful in [
        r#"{"name": "n", "k": 1}"#,
        r#"{"k": "v"}"#,
        r#"{"name": "n", "config": {"name": "m"}}"#,
        r#"{"name": "n", "config": {}, "initial_state": "PAUSED"}"#,
        r#"{"name": "n", "config": {"k": true}}"#,
    ] {
        assert_eq!(json_connector(doubtful), None, "{doubtful}");
    }
}
