//! The logical-message outbox in both configuration forms: the native
//! `[outbox]` keys (`source`, `message_prefixes`, `non_transactional`) and
//! Debezium's chain (`message.prefix.*.list`, `transforms=decode,outbox`
//! with `DecodeLogicalDecodingMessageContent`), with every refusal naming
//! its key. No servers.

use std::collections::BTreeMap;
use std::path::Path;

use walrelay::chain::DisplayChain;
use walrelay::config::kafka_connect::{from_connect, Translation};
use walrelay::config::{Config, ConfigError};
use walrelay::postgres::config::{PublicationMode, SnapshotMode};
use walrelay::router::MessageForm;
use walrelay::txn::config::{NonTransactional, OutboxSource};

use crate::debezium_forms::props;

const NATIVE: &str = r#"
[postgres]
host = "127.0.0.1"
user = "walrelay"
dbname = "app"
[kafka]
bootstrap_servers = "127.0.0.1:9092"
"#;

fn native(extra: &str) -> Result<Config, ConfigError> {
    Config::from_toml(&format!("{NATIVE}\n{extra}"), Path::new("walrelay.toml"))
}

fn native_refused(extra: &str, key: &str) {
    let err = native(extra).expect_err(extra);
    let text = DisplayChain(&err).to_string();
    assert!(text.contains(key), "{key} not named in: {text}");
}

#[test]
fn native_message_source() {
    let c =
        native("[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"outbox\", \"orders\"]\n")
            .unwrap();
    assert_eq!(c.outbox.source, OutboxSource::Messages);
    let sel = c.outbox.message_selection().expect("messages are events");
    assert!(sel.selects("outbox") && sel.selects("orders"));
    // Exact prefixes, case-sensitive; walrelay's heartbeat never.
    assert!(
        !sel.selects("Outbox") && !sel.selects("outbox2") && !sel.selects("walrelay_heartbeat")
    );
    assert_eq!(sel.non_transactional, NonTransactional::Error);
    // The default stays the table outbox, with no message an event.
    let t = native("").unwrap();
    assert_eq!(t.outbox.source, OutboxSource::Table);
    assert!(t.outbox.message_selection().is_none());
    let both = native("[outbox]\nsource = \"both\"\nmessage_prefixes = [\"outbox\"]\nnon_transactional = \"skip\"\n").unwrap();
    assert!(both.outbox.source.table() && both.outbox.source.messages());
    assert_eq!(
        both.outbox.message_selection().unwrap().non_transactional,
        NonTransactional::Skip
    );
}

#[test]
fn native_message_refusals_name_the_key() {
    native_refused(
        "[outbox]\nsource = \"messages\"\n",
        "outbox.message_prefixes",
    );
    native_refused(
        "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"\"]\n",
        "outbox.message_prefixes",
    );
    native_refused(
        "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"walrelay_heartbeat\"]\n",
        "outbox.message_prefixes",
    );
    native_refused(
        "[outbox]\nmessage_prefixes = [\"outbox\"]\n",
        "outbox.message_prefixes",
    );
    native_refused(
        "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"o\"]\nnon_transactional = \"deliver\"\n",
        "outbox.non_transactional",
    );
    native_refused(
        "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"o\"]\n[replication]\nsnapshot_mode = \"initial\"\n",
        "replication.snapshot_mode",
    );
}

/// The example connector turned into a logical-message outbox.
fn message_connector() -> BTreeMap<String, String> {
    let mut c = props("outbox-connector.properties");
    c.remove("table.include.list");
    for (k, v) in [
        ("publication.autocreate.mode", "no_tables"),
        ("message.prefix.include.list", "outbox,orders.*"),
        ("transforms", "decode,outbox"),
        (
            "transforms.decode.type",
            "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
        ),
    ] {
        c.insert(k.into(), v.into());
    }
    c
}

fn translate(connector: BTreeMap<String, String>) -> Result<Translation, ConfigError> {
    from_connect(
        props("connect-standalone.properties"),
        connector,
        Path::new("worker.properties"),
        Path::new("connector.properties"),
    )
}

fn refused(key: &str, edit: impl FnOnce(&mut BTreeMap<String, String>)) {
    let mut c = message_connector();
    edit(&mut c);
    let err = translate(c)
        .err()
        .unwrap_or_else(|| panic!("expected a refusal naming {key}"));
    let text = DisplayChain(&err).to_string();
    assert!(text.contains(key), "{key} not named in: {text}");
}

#[test]
fn debezium_decode_chain() {
    let t = translate(message_connector()).unwrap();
    let c = &t.config;
    assert_eq!(c.outbox.source, OutboxSource::Messages);
    assert_eq!(
        c.debezium.message_form,
        MessageForm::Decode {
            null_include: false
        }
    );
    assert_eq!(c.replication.publication_mode, PublicationMode::NoTables);
    // Debezium's snapshot of no table publishes nothing.
    assert_eq!(c.replication.snapshot_mode, SnapshotMode::NoData);
    let sel = c.outbox.message_selection().unwrap();
    // Regexes against the whole prefix, case-insensitively.
    assert!(sel.selects("outbox") && sel.selects("OUTBOX") && sel.selects("orders-eu"));
    assert!(
        !sel.selects("outbox2") && !sel.selects("x-orders") && !sel.selects("walrelay_heartbeat")
    );
    // Debezium publishes non-transactional messages, rolled back or not.
    assert_eq!(sel.non_transactional, NonTransactional::Deliver);

    let mut nulls = message_connector();
    nulls.insert(
        "transforms.decode.fields.null.include".into(),
        "true".into(),
    );
    nulls.insert("message.prefix.include.list".into(), String::new());
    nulls.insert("message.prefix.exclude.list".into(), "audit.*".into());
    let t = translate(nulls).unwrap();
    assert_eq!(
        t.config.debezium.message_form,
        MessageForm::Decode { null_include: true }
    );
    let sel = t.config.outbox.message_selection().unwrap();
    assert!(sel.selects("outbox") && !sel.selects("Audit_log"));

    // Table rows and messages in one connector.
    let mut both = message_connector();
    both.insert("table.include.list".into(), "public.outbox".into());
    both.insert("publication.autocreate.mode".into(), "filtered".into());
    both.insert("tombstones.on.delete".into(), "false".into());
    let t = translate(both).unwrap();
    assert_eq!(t.config.outbox.source, OutboxSource::Both);
    assert_eq!(t.config.outbox.table.as_deref(), Some("public.outbox"));

    // Without the decode transform messages go out as Debezium's message
    // records, of every prefix but walrelay's heartbeat.
    let t = translate(props("outbox-connector.properties")).unwrap();
    assert_eq!(t.config.outbox.source, OutboxSource::Both);
    assert_eq!(t.config.debezium.message_form, MessageForm::Envelope);
    let sel = t.config.outbox.message_selection().unwrap();
    assert!(sel.selects("anything") && !sel.selects("walrelay_heartbeat"));
    assert_eq!(sel.non_transactional, NonTransactional::Deliver);
}

#[test]
fn debezium_message_refusals_name_the_key() {
    // Debezium refuses both lists.
    refused("message.prefix.exclude.list", |c| {
        c.insert("message.prefix.exclude.list".into(), "x".into());
    });
    refused("message.prefix.include.list", |c| {
        c.insert("message.prefix.include.list".into(), "(unclosed".into());
    });
    // The router before the decode transform would pass messages unrouted.
    refused("transforms", |c| {
        c.insert("transforms".into(), "outbox,decode".into());
    });
    // The decode transform alone emits decoded envelopes, not outbox events.
    refused("transforms.decode.type", |c| {
        c.insert("transforms".into(), "decode".into());
    });
    refused("transforms.outbox.type", |c| {
        c.insert(
            "transforms.outbox.type".into(),
            "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent"
                .into(),
        );
    });
    refused("transforms.decode.type", |c| {
        c.insert(
            "transforms.decode.type".into(),
            "org.apache.kafka.connect.transforms.InsertField$Value".into(),
        );
    });
    refused("transforms.decode.predicate", |c| {
        c.insert("transforms.decode.predicate".into(), "p".into());
    });
    refused("transforms.decode.fields.null.include", |c| {
        c.insert(
            "transforms.decode.fields.null.include".into(),
            "maybe".into(),
        );
    });
    // Without a table, all_tables (Debezium's default) would route every table.
    refused("table.include.list", |c| {
        c.remove("publication.autocreate.mode");
    });
    // Debezium's decode transform fails on a delete's tombstone.
    refused("tombstones.on.delete", |c| {
        c.insert("table.include.list".into(), "public.outbox".into());
        c.insert("publication.autocreate.mode".into(), "filtered".into());
        c.remove("tombstones.on.delete");
    });
}

#[test]
fn debezium_messages_only_without_decode_are_message_records() {
    let mut c = message_connector();
    c.insert("transforms".into(), "outbox".into());
    c.remove("transforms.decode.type");
    let t = translate(c.clone()).unwrap();
    assert_eq!(t.config.outbox.source, OutboxSource::Messages);
    assert_eq!(t.config.debezium.message_form, MessageForm::Envelope);
    // Nor any transform: the same records.
    c.retain(|k, _| !k.starts_with("transforms"));
    let t = translate(c).unwrap();
    assert_eq!(t.config.outbox.source, OutboxSource::Messages);
    assert_eq!(t.config.debezium.message_form, MessageForm::Envelope);
    // With an outbox table, no transform would mean raw change events.
    let mut table = props("outbox-connector.properties");
    table.retain(|k, _| !k.starts_with("transforms"));
    assert!(translate(table).is_err());
}

/// The decode transform reads a message's content as bytes: under another
/// `binary.handling.mode` Debezium's task fails at the first message, so
/// walrelay refuses the combination by the key's name; without the
/// transform every mode is accepted (the `<prefix>.message` records then
/// carry the content as Debezium's mode renders it).
#[test]
fn debezium_decode_needs_binary_bytes() {
    for mode in ["base64", "base64-url-safe", "hex"] {
        refused("binary.handling.mode", |m| {
            m.insert("binary.handling.mode".into(), mode.into());
        });
    }
    let mut bytes = message_connector();
    bytes.insert("binary.handling.mode".into(), "bytes".into());
    translate(bytes).expect("bytes is what the decode transform reads");
}
