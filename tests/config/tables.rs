//! Several outbox tables in one pipeline, in every configuration form: the
//! native `[[outbox.tables]]` list (each table optionally with column names
//! of its own) and its refusals by name, Debezium's `table.include.list`
//! with several tables (Kafka Connect and Debezium Server), the predicates,
//! schema lists and snapshot list checked for every table, and the polling
//! source refusing more than one table. No servers.

use std::path::Path;

use walrelay::chain::DisplayChain;
use walrelay::config::debezium_server::from_server_text;
use walrelay::config::kafka_connect::{from_connect, Translation};
use walrelay::config::{Config, ConfigError};
use walrelay::router::{ColumnOverrides, Router};
use walrelay::txn::config::{OutboxTableSpec, KEY_TABLE};

use crate::debezium_forms::{data, props};

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

/// The refusal of `extra`, which must name `key`; returns its text.
fn native_refused(extra: &str, key: &str) -> String {
    let err = native(extra).expect_err(extra);
    let text = DisplayChain(&err).to_string();
    assert!(text.contains(key), "{key} not named in: {text}");
    text
}

fn names(specs: &[OutboxTableSpec]) -> Vec<String> {
    specs.iter().map(OutboxTableSpec::qualified).collect()
}

#[test]
fn one_table_keeps_working_and_is_the_default() {
    let c = native("").unwrap();
    let t = c.outbox.tables().unwrap();
    assert_eq!(names(&t), ["public.outbox"]);
    assert_eq!(t[0].key, KEY_TABLE);
    let c = native("[outbox]\ntable = \"app.Events\"\n").unwrap();
    assert_eq!(names(&c.outbox.tables().unwrap()), ["app.events"]);
    assert_eq!(c.outbox.table_count(), 1);
}

#[test]
fn the_list_form_reads_each_table_with_its_own_columns() {
    let c = native(
        r#"
[outbox]
op_invalid_behavior = "fatal"

[[outbox.tables]]
name = "public.outbox"

[[outbox.tables]]
name = "billing.events"
id_field = "event_id"
key_field = "account_id"
payload_field = "body"
route_by_field = "kind"
additional_placement = "kind:header:eventType"

[[outbox.tables]]
name = '"Shipping"."Outbox"'
timestamp_field = "created"
"#,
    )
    .unwrap();
    let t = c.outbox.tables().unwrap();
    assert_eq!(
        names(&t),
        ["public.outbox", "billing.events", "Shipping.Outbox"]
    );
    assert_eq!(c.outbox.table_count(), 3);
    assert!(t[0].columns.is_empty());
    assert_eq!(t[1].key, "outbox.tables[1]");
    assert_eq!(
        t[1].columns,
        ColumnOverrides {
            id_field: Some("event_id".into()),
            key_field: Some("account_id".into()),
            payload_field: Some("body".into()),
            route_by_field: Some("kind".into()),
            additional_placement: Some("kind:header:eventType".into()),
            ..ColumnOverrides::default()
        }
    );
    assert_eq!(t[2].columns.timestamp_field.as_deref(), Some("created"));

    // Each table's mapping: its own names where it sets them, [router]'s
    // elsewhere; an unchanged table shares [router]'s own mapping.
    let router = Router::new(c.router.clone(), c.converters, c.debezium.clone()).unwrap();
    let own = router.mapping(&t[1].columns).unwrap();
    assert_eq!(own.id_field(), "event_id");
    assert_eq!(own.key_field(), "account_id");
    assert_eq!(own.payload_field(), "body");
    assert_eq!(own.route_by_field(), "kind");
    assert!(!own.is_router_default());
    let shared = router.mapping(&t[0].columns).unwrap();
    assert!(shared.is_router_default());
    assert_eq!(shared.key_field(), "aggregateid");
    let partial = router.mapping(&t[2].columns).unwrap();
    assert_eq!(partial.key_field(), "aggregateid");
}

#[test]
fn table_and_tables_together_are_refused_by_name() {
    let text = native_refused(
        "[outbox]\ntable = \"public.outbox\"\n[[outbox.tables]]\nname = \"public.other\"\n",
        "outbox.tables",
    );
    assert!(text.contains("outbox.table"), "{text}");
}

#[test]
fn a_table_listed_twice_is_refused_by_name() {
    // Unquoted names fold to lower case, and the schema defaults to public.
    let text = native_refused(
        "[[outbox.tables]]\nname = \"public.outbox\"\n[[outbox.tables]]\nname = \"a.b\"\n\
         [[outbox.tables]]\nname = \"Outbox\"\n",
        "outbox.tables[2].name",
    );
    assert!(text.contains("public.outbox"), "{text}");
    assert!(text.contains("outbox.tables[0].name"), "{text}");
}

#[test]
fn per_table_keys_that_make_no_sense_are_refused_by_name() {
    let entry = |line: &str| {
        format!("[[outbox.tables]]\nname = \"public.a\"\n[[outbox.tables]]\nname = \"public.b\"\n{line}\n")
    };
    for (line, key, why) in [
        (
            "route_topic_regex = \"x\"",
            "outbox.tables[1].route_topic_regex",
            "router.route_topic_regex",
        ),
        (
            "route_topic_replacement = \"x\"",
            "outbox.tables[1].route_topic_replacement",
            "router.route_topic_replacement",
        ),
        (
            "expand_json_payload = true",
            "outbox.tables[1].expand_json_payload",
            "router.expand_json_payload",
        ),
        (
            "null_key = \"allow\"",
            "outbox.tables[1].null_key",
            "router.null_key",
        ),
        (
            "op_invalid_behavior = \"fatal\"",
            "outbox.tables[1].op_invalid_behavior",
            "outbox.op_invalid_behavior",
        ),
        (
            "source = \"both\"",
            "outbox.tables[1].source",
            "outbox.source",
        ),
        ("table = \"public.c\"", "outbox.tables[1].table", "name ="),
        ("colour = \"red\"", "outbox.tables[1].colour", "unknown key"),
    ] {
        let text = native_refused(&entry(line), key);
        assert!(text.contains(why), "{line}: {text}");
    }
    // A column name must name something.
    native_refused(&entry("key_field = \" \""), "outbox.tables[1].key_field");
    // A placement is checked as [router]'s is, and named per table.
    native_refused(
        &entry("additional_placement = \"type:sideways\""),
        "outbox.tables[1].additional_placement",
    );
    native_refused(
        &entry("additional_placement = \"a:envelope:x,b:envelope:x\""),
        "outbox.tables[1].additional_placement",
    );
    // A name that is no table name.
    native_refused(
        "[[outbox.tables]]\nname = \"a.b.c\"\n",
        "outbox.tables[0].name",
    );
    // A table entry without a name.
    native_refused("[[outbox.tables]]\nkey_field = \"k\"\n", "name");
}

#[test]
fn tables_with_messages_only_are_refused() {
    native_refused(
        "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"o\"]\n\
         [[outbox.tables]]\nname = \"public.a\"\n",
        "outbox.tables",
    );
    // Rows and messages together take the tables.
    let c = native(
        "[outbox]\nsource = \"both\"\nmessage_prefixes = [\"o\"]\n\
         [[outbox.tables]]\nname = \"public.a\"\n[[outbox.tables]]\nname = \"public.b\"\n",
    )
    .unwrap();
    assert_eq!(c.outbox.table_count(), 2);
}

#[test]
fn the_polling_source_refuses_several_tables_by_name() {
    let poll = "[source]\nkind = \"poll\"\n[poll]\norder_by = [\"seq\"]\n";
    let text = native_refused(
        &format!(
            "{poll}[[outbox.tables]]\nname = \"public.a\"\n[[outbox.tables]]\nname = \"public.b\"\n"
        ),
        "outbox.tables",
    );
    assert!(text.contains("claims from one table"), "{text}");
    // One table in the list form, with its own columns, is fine.
    let c = native(&format!(
        "{poll}[[outbox.tables]]\nname = \"billing.events\"\nkey_field = \"account_id\"\n"
    ))
    .unwrap();
    assert_eq!(
        c.outbox.qualified().unwrap(),
        ("billing".into(), "events".into())
    );
}

fn connect(edit: &[(&str, &str)]) -> Result<Translation, ConfigError> {
    let mut c = props("outbox-connector.properties");
    for (k, v) in edit {
        if v.is_empty() {
            c.remove(*k);
        } else {
            c.insert((*k).into(), (*v).into());
        }
    }
    from_connect(
        props("connect-standalone.properties"),
        c,
        Path::new("worker.properties"),
        Path::new("connector.properties"),
    )
}

fn connect_refused(edit: &[(&str, &str)], key: &str) -> String {
    let err = connect(edit).expect_err("refused");
    let text = DisplayChain(&err).to_string();
    assert!(text.contains(key), "{key} not named in: {text}");
    text
}

const THREE: &str = "public.orders_outbox, billing.outbox ,public.shipping_outbox";

#[test]
fn table_include_list_with_several_tables_becomes_the_list() {
    let t = connect(&[("table.include.list", THREE)]).unwrap();
    let c = &t.config;
    assert_eq!(c.outbox.table, None);
    let specs = c.outbox.tables().unwrap();
    assert_eq!(
        names(&specs),
        [
            "public.orders_outbox",
            "billing.outbox",
            "public.shipping_outbox"
        ]
    );
    // One EventRouter for all: no table has columns of its own.
    assert!(specs.iter().all(|s| s.columns.is_empty()));
    // A table named twice is captured once, as Debezium's pattern set does.
    let t = connect(&[("table.include.list", "public.a,public.b,public.A")]).unwrap();
    assert_eq!(
        names(&t.config.outbox.tables().unwrap()),
        ["public.a", "public.b"]
    );
    // One table stays the one-table form.
    let t = connect(&[("table.include.list", "public.a,public.a")]).unwrap();
    assert_eq!(t.config.outbox.table.as_deref(), Some("public.a"));
}

#[test]
fn every_table_of_the_list_is_checked() {
    connect_refused(
        &[("table.include.list", "public.a,public.b.*")],
        "table.include.list",
    );
    connect_refused(
        &[("table.include.list", "public.a,b")],
        "table.include.list",
    );
    // The schema lists must let every table through.
    connect(&[
        ("table.include.list", THREE),
        ("schema.include.list", "public,billing"),
    ])
    .unwrap();
    let text = connect_refused(
        &[
            ("table.include.list", THREE),
            ("schema.include.list", "public"),
        ],
        "schema.include.list",
    );
    assert!(text.contains("billing.outbox"), "{text}");
    let text = connect_refused(
        &[
            ("table.include.list", THREE),
            ("schema.exclude.list", "billing"),
        ],
        "schema.exclude.list",
    );
    assert!(text.contains("billing.outbox"), "{text}");
    // A snapshot list that leaves a table out.
    connect(&[
        ("table.include.list", THREE),
        ("snapshot.mode", "initial"),
        (
            "snapshot.include.collection.list",
            "public.orders_outbox,billing.outbox,public.shipping_outbox",
        ),
    ])
    .unwrap();
    let text = connect_refused(
        &[
            ("table.include.list", THREE),
            ("snapshot.mode", "initial"),
            (
                "snapshot.include.collection.list",
                "public.orders_outbox,billing.outbox",
            ),
        ],
        "snapshot.include.collection.list",
    );
    assert!(text.contains("public.shipping_outbox"), "{text}");
}

#[test]
fn the_router_predicate_must_hold_for_every_table_topic() {
    const TOPIC: &str = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches";
    let with = |pattern: &'static str| {
        [
            ("table.include.list", THREE),
            ("predicates", "p"),
            ("predicates.p.type", TOPIC),
            ("predicates.p.pattern", pattern),
            ("transforms.outbox.predicate", "p"),
        ]
    };
    // shop.<schema>.<table> for every table.
    connect(&with("shop\\.(public|billing)\\..*")).unwrap();
    let text = connect_refused(&with("shop\\.public\\..*"), "transforms.outbox.predicate");
    assert!(text.contains("shop.billing.outbox"), "{text}");
}

#[test]
fn debezium_server_takes_several_tables_too() {
    let text = std::fs::read_to_string(data("application.properties"))
        .unwrap()
        .replace(
            "debezium.source.table.include.list=public.outbox",
            "debezium.source.table.include.list=public.outbox,billing.outbox",
        );
    // The file's ${PG_HOST}-style references, as a deployment sets them.
    let env = |name: &str| {
        let plain = name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        (plain && !name.starts_with("DEBEZIUM_")).then(|| "placeholder".to_owned())
    };
    let t = from_server_text(&text, Path::new("application.properties"), &env).unwrap();
    assert_eq!(
        names(&t.config.outbox.tables().unwrap()),
        ["public.outbox", "billing.outbox"]
    );
}

/// The documented native example of several tables validates.
#[test]
fn the_documented_example_validates() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/walrelay-tables.toml"),
    )
    .unwrap()
    .replace(
        "password_env = \"WALRELAY_PG_PASSWORD\"",
        "password = \"example\"",
    );
    let c = Config::from_toml(&text, Path::new("walrelay-tables.toml")).unwrap();
    let specs = c.outbox.tables().unwrap();
    assert!(specs.len() >= 2, "{specs:?}");
    assert!(specs.iter().any(|s| !s.columns.is_empty()), "{specs:?}");
}
