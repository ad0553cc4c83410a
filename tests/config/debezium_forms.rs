//! Debezium's configuration forms (Kafka Connect worker + connector,
//! Debezium Server) translated into walrelay's `Config`: field by field,
//! every refusal naming its key, environment overrides, `$${}` escapes,
//! secrets kept out of `Debug` and errors, and the CLI's validate paths.
//!
//! These tests need no servers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use walrelay::chain::DisplayChain;
use walrelay::config::connector_json::parse_connector_json;
use walrelay::config::debezium_server::from_server_text;
use walrelay::config::kafka_connect::{from_connect, load_connect, Translation};
use walrelay::config::{Config, ConfigError};
use walrelay::connect::config::{ConverterKind, HeaderConverterKind};
use walrelay::postgres::config::{PortSetting, PublicationMode, SnapshotMode, TargetSessionAttrs};
use walrelay::properties::parse_properties;
use walrelay::txn::config::OpInvalidBehavior;

pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/debezium")
        .join(name)
}

pub(crate) fn props(name: &str) -> BTreeMap<String, String> {
    parse_properties(&std::fs::read_to_string(data(name)).unwrap()).unwrap()
}

fn chain(e: &ConfigError) -> String {
    DisplayChain(e).to_string()
}

fn connect(
    worker: BTreeMap<String, String>,
    connector: BTreeMap<String, String>,
) -> Result<Translation, ConfigError> {
    from_connect(
        worker,
        connector,
        Path::new("worker.properties"),
        Path::new("connector.properties"),
    )
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn assert_connect_example(t: &Translation) {
    let c = &t.config;
    assert_eq!(c.postgres.host, "db.internal");
    assert_eq!(c.postgres.port, PortSetting::One(6432));
    assert_eq!(c.postgres.user, "debezium");
    assert_eq!(c.postgres.dbname, "shop");
    assert_eq!(
        c.postgres
            .password
            .as_ref()
            .map(walrelay::secret::Secret::expose),
        Some("pg-s3cret")
    );
    assert_eq!(c.replication.slot, "outbox_slot");
    assert_eq!(c.replication.publication, "outbox_pub");
    assert_eq!(c.replication.publication_mode, PublicationMode::Filtered);
    assert_eq!(c.replication.publish.as_deref(), Some("insert"));
    assert_eq!(c.replication.snapshot_mode, SnapshotMode::NoData);
    assert!(!c.replication.slot_drop_on_stop);
    assert_eq!(c.outbox.table.as_deref(), Some("public.outbox"));
    // Updates are skipped by the publication, so they cannot be fatal.
    assert_eq!(c.outbox.op_invalid_behavior, OpInvalidBehavior::Warn);
    assert_eq!(c.router.route_by_field, "aggregatetype");
    assert_eq!(c.router.key_field, "aggregateid");
    assert_eq!(c.router.route_topic_replacement, "events.${routedByValue}");
    assert_eq!(c.converters.key, ConverterKind::String);
    assert!(c.converters.key_schemas_enable);
    assert_eq!(c.converters.value, ConverterKind::Json);
    assert!(!c.converters.value_schemas_enable);
    assert_eq!(c.converters.header, HeaderConverterKind::Simple);
    assert_eq!(c.debezium.topic_prefix, "shop");
    assert!(c.debezium.extended_headers);
    assert!(!c.debezium.server_mode);
    assert_eq!(c.heartbeat.interval_ms, 10_000);
    assert_eq!(
        c.heartbeat.action_query.as_deref(),
        Some("INSERT INTO heartbeat (ts) VALUES (now())")
    );
    assert_eq!(c.heartbeat.topic_prefix, "__debezium-heartbeat");
    assert_eq!(c.kafka.bootstrap_servers, "kafka-1:9092,kafka-2:9092");
    let p = &c.kafka.producer;
    assert_eq!(p["compression.type"], "lz4");
    assert_eq!(p["linger.ms"], "20");
    assert_eq!(p["message.max.bytes"], "2097152");
    assert_eq!(p["message.timeout.ms"], "300000");
    assert_eq!(p["security.protocol"], "sasl_plaintext");
    assert_eq!(p["sasl.mechanism"], "SCRAM-SHA-512");
    assert_eq!(p["sasl.username"], "relay");
    assert_eq!(p["queue.buffering.max.kbytes"], "32768");
    assert!(!p.contains_key("sasl.password"));
    assert!(!p.contains_key("sasl.jaas.config"));
    assert_eq!(c.kafka.secrets["sasl.password"].expose(), "kafka-s3cret");
    for key in [
        "offset.flush.interval.ms",
        "offset.storage.file.filename",
        "plugin.path",
        "max.batch.size",
        "tombstones.on.delete",
    ] {
        assert!(t.ignored(key), "{key} not warned about: {:?}", t.ignored);
    }
}

#[test]
fn connect_standalone_properties() {
    let t = load_connect(
        &data("connect-standalone.properties"),
        &data("outbox-connector.properties"),
    )
    .unwrap();
    assert_connect_example(&t);
}

#[test]
fn connect_standalone_json_matches_properties() {
    let t = load_connect(
        &data("connect-standalone.properties"),
        &data("outbox-connector.json"),
    )
    .unwrap();
    assert_connect_example(&t);
}

#[test]
fn connect_defaults_are_debeziums() {
    let mut connector = props("outbox-connector.properties");
    for key in [
        "slot.name",
        "publication.name",
        "publication.autocreate.mode",
        "snapshot.mode",
        "skipped.operations",
        "heartbeat.interval.ms",
        "heartbeat.action.query",
        "database.port",
    ] {
        connector.remove(key);
    }
    let mut worker = props("connect-standalone.properties");
    worker.remove("bootstrap.servers");
    let c = connect(worker, connector).unwrap().config;
    assert_eq!(c.replication.slot, "debezium");
    assert_eq!(c.replication.publication, "dbz_publication");
    assert_eq!(c.replication.publication_mode, PublicationMode::AllTables);
    assert_eq!(c.replication.snapshot_mode, SnapshotMode::Initial);
    assert_eq!(c.replication.publish, None);
    assert_eq!(c.outbox.op_invalid_behavior, OpInvalidBehavior::Fatal);
    assert_eq!(c.heartbeat.interval_ms, 0);
    assert_eq!(c.postgres.port, PortSetting::One(5432));
    assert_eq!(c.kafka.bootstrap_servers, "localhost:9092");
}

#[test]
fn connector_level_converter_overrides_worker() {
    let mut connector = props("outbox-connector.properties");
    connector.insert(
        "value.converter".into(),
        "org.apache.kafka.connect.storage.StringConverter".into(),
    );
    connector.insert(
        "header.converter".into(),
        "org.apache.kafka.connect.json.JsonConverter".into(),
    );
    connector.insert("header.converter.schemas.enable".into(), "false".into());
    // Without its own class, a connector's schemas.enable is ignored.
    connector.insert("key.converter.schemas.enable".into(), "false".into());
    let t = connect(props("connect-standalone.properties"), connector).unwrap();
    let c = &t.config.converters;
    assert_eq!(c.value, ConverterKind::String);
    assert_eq!(c.header, HeaderConverterKind::Json);
    assert!(!c.header_schemas_enable);
    assert!(c.key_schemas_enable);
    assert!(t.ignored("key.converter.schemas.enable"));
}

/// `slot.failover` maps to `replication.failover` (no longer an ignored
/// key), in the Kafka Connect form and in Debezium Server's, where the
/// environment alone may set it.
#[test]
fn slot_failover_maps_to_replication_failover() {
    let c = connect(
        props("connect-standalone.properties"),
        props("outbox-connector.properties"),
    )
    .unwrap()
    .config;
    assert!(!c.replication.failover, "Debezium's default is false");
    let mut connector = props("outbox-connector.properties");
    connector.insert("slot.failover".into(), "true".into());
    let t = connect(props("connect-standalone.properties"), connector).unwrap();
    assert!(t.config.replication.failover);
    assert!(
        !t.ignored("slot.failover"),
        "slot.failover must not be ignored"
    );
    refused_connector("slot.failover", set("slot.failover", "sometimes"));

    let env = |name: &str| match name {
        "PG_HOST" => Some("h".to_owned()),
        _ => None,
    };
    let text = format!("{}\ndebezium.source.slot.failover=true\n", example_server());
    assert!(server(&text, &env).unwrap().config.replication.failover);
    let env = |name: &str| match name {
        "PG_HOST" => Some("h".to_owned()),
        "DEBEZIUM_SOURCE_SLOT_FAILOVER" => Some("true".to_owned()),
        _ => None,
    };
    assert!(
        server(&example_server(), &env)
            .unwrap()
            .config
            .replication
            .failover
    );
}

/// Applies `edit` to the example connector and expects a refusal naming `key`.
fn refused_connector(key: &str, edit: impl FnOnce(&mut BTreeMap<String, String>)) {
    let mut connector = props("outbox-connector.properties");
    edit(&mut connector);
    let err = connect(props("connect-standalone.properties"), connector)
        .err()
        .unwrap_or_else(|| panic!("expected a refusal naming {key}"));
    let text = chain(&err);
    assert!(text.contains(key), "{key} not named in: {text}");
    assert!(
        !text.contains("pg-s3cret") && !text.contains("kafka-s3cret"),
        "{text}"
    );
}

fn set(key: &'static str, value: &'static str) -> impl FnOnce(&mut BTreeMap<String, String>) {
    move |m| {
        m.insert(key.into(), value.into());
    }
}

#[test]
fn connector_refusals_name_the_key() {
    refused_connector("plugin.name", |m| {
        m.remove("plugin.name");
    });
    refused_connector("plugin.name", set("plugin.name", "decoderbufs"));
    refused_connector(
        "connector.class",
        set(
            "connector.class",
            "io.debezium.connector.mysql.MySqlConnector",
        ),
    );
    refused_connector("tasks.max", set("tasks.max", "2"));
    refused_connector(
        "database.sslmode",
        set("database.sslmode", "verify-everything"),
    );
    refused_connector(
        "database.sslfactory",
        set(
            "database.sslfactory",
            "org.postgresql.ssl.NonValidatingFactory",
        ),
    );
    refused_connector(
        "table.include.list",
        set("table.include.list", "public.outbox,public.other.*"),
    );
    refused_connector(
        "table.include.list",
        set("table.include.list", "public.outbox.*"),
    );
    refused_connector("table.include.list", set("table.include.list", "outbox"));
    refused_connector("table.include.list", |m| {
        m.remove("table.include.list");
    });
    refused_connector("topic.prefix", |m| {
        m.remove("topic.prefix");
    });
    refused_connector("snapshot.mode", set("snapshot.mode", "initial_only"));
    refused_connector("snapshot.mode", set("snapshot.mode", "never"));
    refused_connector("skipped.operations", set("skipped.operations", "c,u"));
    refused_connector(
        "publication.autocreate.mode",
        set("publication.autocreate.mode", "sometimes"),
    );
    refused_connector("slot.name", set("slot.name", "Bad-Slot"));
    refused_connector("transforms", set("transforms", "outbox,unwrap"));
    refused_connector("transforms", |m| {
        m.remove("transforms");
    });
    refused_connector(
        "transforms.outbox.type",
        set(
            "transforms.outbox.type",
            "io.debezium.transforms.ExtractNewRecordState",
        ),
    );
    refused_connector(
        "transforms.outbox.predicate",
        set("transforms.outbox.predicate", "isOutbox"),
    );
    // Kafka's transforms run after the router; one of the plugin
    // archive's that does not apply to outbox events is refused by its
    // type key, with why.
    let mut connector = props("outbox-connector.properties");
    connector.insert("transforms".into(), "outbox,rename".into());
    connector.insert(
        "transforms.rename.type".into(),
        "org.apache.kafka.connect.transforms.RegexRouter".into(),
    );
    connector.insert("transforms.rename.regex".into(), "(.*)".into());
    connector.insert("transforms.rename.replacement".into(), "x.$1".into());
    assert!(connect(props("connect-standalone.properties"), connector).is_ok());
    refused_connector("transforms.flat.type", |m| {
        m.insert("transforms".into(), "outbox,flat".into());
        m.insert(
            "transforms.flat.type".into(),
            "io.debezium.transforms.ExtractNewRecordState".into(),
        );
    });
    let mut connector = props("outbox-connector.properties");
    connector.insert(
        "transforms.outbox.type".into(),
        "io.debezium.transforms.ExtractNewRecordState".into(),
    );
    let Err(err) = connect(props("connect-standalone.properties"), connector) else {
        panic!("ExtractNewRecordState must be refused");
    };
    let text = chain(&err);
    assert!(
        text.contains("flattens Debezium change events"),
        "says why: {text}"
    );
    refused_connector("predicates", set("predicates", "isOutbox"));
    // The type-mapping options are implemented; a value Debezium does not
    // know is refused by name.
    refused_connector(
        "decimal.handling.mode",
        set("decimal.handling.mode", "float"),
    );
    refused_connector("time.precision.mode", set("time.precision.mode", "millis"));
    refused_connector(
        "binary.handling.mode",
        set("binary.handling.mode", "base32"),
    );
    refused_connector("money.fraction.digits", set("money.fraction.digits", "two"));
    refused_connector(
        "message.key.columns",
        set("message.key.columns", "public.outbox:id"),
    );
    refused_connector(
        "column.mask.with.10.chars",
        set("column.mask.with.10.chars", "public.outbox.payload"),
    );
    refused_connector(
        "snapshot.select.statement.overrides",
        set("snapshot.select.statement.overrides", "public.outbox"),
    );
    refused_connector("errors.tolerance", set("errors.tolerance", "all"));
    refused_connector(
        "key.converter",
        set("key.converter", "io.confluent.connect.avro.AvroConverter"),
    );
    refused_connector("producer.override.acks", set("producer.override.acks", "1"));
    // The router's own validation names its option within the transform.
    refused_connector(
        "transforms.outbox: route.topic.regex",
        set("transforms.outbox.route.topic.regex", "[a-z"),
    );
    refused_connector(
        "transforms.outbox: table.op.invalid.behavior",
        set("transforms.outbox.table.op.invalid.behavior", "explode"),
    );
}

#[test]
fn accepted_defaults_are_warned_not_refused() {
    let mut connector = props("outbox-connector.properties");
    connector.insert("publish.via.partition.root".into(), "false".into());
    connector.insert("include.schema.comments".into(), "false".into());
    connector.insert("some.future.key".into(), "x".into());
    let t = connect(props("connect-standalone.properties"), connector).unwrap();
    for key in [
        "publish.via.partition.root",
        "include.schema.comments",
        "some.future.key",
    ] {
        assert!(t.ignored(key), "{key}: {:?}", t.ignored);
    }
}

fn refused_worker(key: &str, edit: impl FnOnce(&mut BTreeMap<String, String>)) {
    let mut worker = props("connect-standalone.properties");
    edit(&mut worker);
    let err = connect(worker, props("outbox-connector.properties"))
        .err()
        .unwrap_or_else(|| panic!("expected a refusal naming {key}"));
    let text = chain(&err);
    assert!(text.contains(key), "{key} not named in: {text}");
    assert!(text.contains("worker.properties"), "{text}");
    assert!(!text.contains("kafka-s3cret"), "{text}");
}

#[test]
fn worker_refusals_name_the_key() {
    refused_worker("producer.acks", set("producer.acks", "1"));
    refused_worker(
        "producer.enable.idempotence",
        set("producer.enable.idempotence", "false"),
    );
    refused_worker(
        "producer.sasl.mechanism",
        set("producer.sasl.mechanism", "GSSAPI"),
    );
    refused_worker("producer.sasl.mechanism", |m| {
        m.remove("producer.sasl.mechanism");
    });
    refused_worker(
        "producer.sasl.jaas.config",
        set(
            "producer.sasl.jaas.config",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
        ),
    );
    refused_worker(
        "producer.partitioner.class",
        set(
            "producer.partitioner.class",
            "org.apache.kafka.clients.producer.RoundRobinPartitioner",
        ),
    );
    refused_worker("value.converter", |m| {
        m.remove("value.converter");
    });
    refused_worker(
        "header.converter",
        set(
            "header.converter",
            "org.apache.kafka.connect.converters.ByteArrayConverter",
        ),
    );
}

#[test]
fn truststores() {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("ca.pem");
    std::fs::write(
        &pem,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let jks = dir.path().join("ca.jks");
    std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();

    let mut worker = props("connect-standalone.properties");
    worker.insert(
        "producer.ssl.truststore.location".into(),
        pem.display().to_string(),
    );
    let c = connect(worker, props("outbox-connector.properties"))
        .unwrap()
        .config;
    assert_eq!(
        c.kafka.producer["ssl.ca.location"],
        pem.display().to_string()
    );

    let jks = jks.display().to_string();
    refused_worker("producer.ssl.truststore.location", move |m| {
        m.insert("producer.ssl.truststore.location".into(), jks);
    });
    refused_worker("producer.ssl.truststore.location", |m| {
        m.insert(
            "producer.ssl.truststore.location".into(),
            "/nonexistent/ca.jks".into(),
        );
        m.insert("producer.ssl.truststore.type".into(), "JKS".into());
    });
}

#[test]
fn secrets_stay_out_of_debug_and_errors() {
    let t = load_connect(
        &data("connect-standalone.properties"),
        &data("outbox-connector.properties"),
    )
    .unwrap();
    let shown = format!("{t:?}");
    assert!(!shown.contains("pg-s3cret"), "{shown}");
    assert!(!shown.contains("kafka-s3cret"), "{shown}");
    assert!(shown.contains("sasl.password"), "{shown}");

    // A malformed JAAS line is refused without echoing it.
    let mut worker = props("connect-standalone.properties");
    worker.insert(
        "producer.sasl.jaas.config".into(),
        "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"kafka-s3cret"
            .into(),
    );
    let err = connect(worker, props("outbox-connector.properties")).unwrap_err();
    assert!(!chain(&err).contains("kafka-s3cret"), "{}", chain(&err));
}

fn server(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Translation, ConfigError> {
    from_server_text(text, Path::new("application.properties"), env)
}

fn example_server() -> String {
    std::fs::read_to_string(data("application.properties")).unwrap()
}

#[test]
fn debezium_server_example() {
    let env = |name: &str| match name {
        "PG_HOST" => Some("pg.internal".to_owned()),
        "DEBEZIUM_SOURCE_DATABASE_PASSWORD" => Some("env-password".to_owned()),
        _ => None,
    };
    let t = server(&example_server(), &env).unwrap();
    let c = &t.config;
    assert_eq!(c.postgres.host, "pg.internal");
    assert_eq!(c.postgres.user, "debezium");
    // The environment overrides the file's value.
    assert_eq!(
        c.postgres
            .password
            .as_ref()
            .map(walrelay::secret::Secret::expose),
        Some("env-password")
    );
    assert_eq!(c.kafka.bootstrap_servers, "localhost:9092");
    assert_eq!(c.kafka.producer["compression.type"], "zstd");
    assert!(!c.kafka.producer.contains_key("key.serializer"));
    assert_eq!(c.replication.slot, "debezium");
    assert_eq!(c.replication.publication, "dbz_publication");
    assert_eq!(c.replication.publication_mode, PublicationMode::AllTables);
    assert_eq!(c.replication.snapshot_mode, SnapshotMode::NoData);
    assert_eq!(c.debezium.topic_prefix, "shop");
    assert!(c.debezium.server_mode);
    assert!(c.debezium.extended_headers);
    assert_eq!(c.converters.key, ConverterKind::String);
    assert_eq!(c.converters.value, ConverterKind::String);
    assert_eq!(c.converters.header, HeaderConverterKind::Json);
    assert!(!c.converters.header_schemas_enable);
    // `$${...}` is the escape for a literal `${...}`.
    assert_eq!(
        c.router.route_topic_replacement,
        "outbox.event.${routedByValue}"
    );
    assert!(t.ignored("debezium.source.offset.flush.interval.ms"));
    assert!(t.ignored("quarkus.log.level"));
    let shown = format!("{t:?}");
    assert!(!shown.contains("env-password") && !shown.contains("file-password"));
}

#[test]
fn debezium_server_defaults_and_env_only_keys() {
    let env = |name: &str| match name {
        "PG_HOST" => Some("h".to_owned()),
        "KAFKA_BOOTSTRAP" => Some("k:9093".to_owned()),
        // Not in the file at all: known keys are still picked up.
        "DEBEZIUM_SOURCE_SLOT_NAME" => Some("from_env".to_owned()),
        _ => None,
    };
    let text = example_server()
        .lines()
        .filter(|l| !l.starts_with("debezium.format."))
        .collect::<Vec<_>>()
        .join("\n");
    let c = server(&text, &env).unwrap().config;
    assert_eq!(c.kafka.bootstrap_servers, "k:9093");
    assert_eq!(c.replication.slot, "from_env");
    // `json` everywhere, schemas on, headers included.
    assert_eq!(c.converters.key, ConverterKind::Json);
    assert_eq!(c.converters.value, ConverterKind::Json);
    assert_eq!(c.converters.header, HeaderConverterKind::Json);
    assert!(c.converters.key_schemas_enable && c.converters.value_schemas_enable);
    assert!(c.converters.header_schemas_enable);

    let all_off = format!("{text}\ndebezium.format.schemas.enable=false\ndebezium.format.value.schemas.enable=true\ndebezium.format.value=jsonbytearray\ndebezium.format.key=binary\n");
    let c = server(&all_off, &env).unwrap().config;
    assert!(!c.converters.key_schemas_enable && !c.converters.header_schemas_enable);
    assert!(c.converters.value_schemas_enable);
    assert_eq!(c.converters.value, ConverterKind::Json);
    assert_eq!(c.converters.key, ConverterKind::BinaryData);
}

/// A PKCS#12 truststore whose password comes only from the environment
/// (`DEBEZIUM_SINK_KAFKA_PRODUCER_SSL_TRUSTSTORE_PASSWORD`), as a Debezium
/// Server deployment keeps it out of the file: its certificate reaches
/// librdkafka as `ssl.ca.pem`, and the password shows nowhere.
#[test]
fn debezium_server_truststore_password_from_env() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=env truststore CA",
    ]);
    run(&[
        "pkcs12",
        "-export",
        "-nokeys",
        "-in",
        "ca.crt",
        "-passout",
        "pass:Env-Trust-Pw-7",
        "-out",
        "trust.p12",
    ]);
    let store = dir.path().join("trust.p12");
    let text = format!(
        "{}\ndebezium.sink.kafka.producer.security.protocol=SSL\n\
         debezium.sink.kafka.producer.ssl.truststore.type=PKCS12\n\
         debezium.sink.kafka.producer.ssl.truststore.location={}\n",
        example_server(),
        store.display()
    );
    let env = |name: &str| match name {
        "PG_HOST" => Some("h".to_owned()),
        "DEBEZIUM_SINK_KAFKA_PRODUCER_SSL_TRUSTSTORE_PASSWORD" => Some("Env-Trust-Pw-7".to_owned()),
        _ => None,
    };
    let t = server(&text, &env).unwrap_or_else(|e| panic!("{}", chain(&e)));
    let pem = &t.config.kafka.producer["ssl.ca.pem"];
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).unwrap();
    assert_eq!(pem.trim(), ca.trim(), "the truststore's certificate");
    assert!(!format!("{t:?}").contains("Env-Trust-Pw-7"));
    // Without the environment's password the store does not open, and the
    // error names the key to set.
    let no_env = |name: &str| (name == "PG_HOST").then(|| "h".to_owned());
    let err = chain(&server(&text, &no_env).unwrap_err());
    assert!(err.contains("ssl.truststore.password"), "{err}");
}

#[test]
fn debezium_server_refusals_name_the_key() {
    let env = |name: &str| (name == "PG_HOST").then(|| "h".to_owned());
    let cases = [
        ("debezium.sink.type=pravega", "debezium.sink.type"),
        ("debezium.format.value=avro", "debezium.format.value"),
        (
            "debezium.format.header=simplestring",
            "debezium.format.header",
        ),
        (
            "debezium.source.plugin.name=decoderbufs",
            "debezium.source.plugin.name",
        ),
        (
            "debezium.source.decimal.handling.mode=float",
            "debezium.source.decimal.handling.mode",
        ),
        ("debezium.predicates=isOutbox", "debezium.predicates"),
        (
            "debezium.transforms.outbox.type=x.Y",
            "debezium.transforms.outbox.type",
        ),
        (
            "debezium.source.database.hostname=${UNSET_VAR}",
            "UNSET_VAR",
        ),
        (
            "debezium.sink.kafka.producer.acks=0",
            "debezium.sink.kafka.producer.acks",
        ),
    ];
    for (line, key) in cases {
        let err = server(&format!("{}\n{line}\n", example_server()), &env)
            .err()
            .unwrap_or_else(|| panic!("{line} accepted"));
        let text = chain(&err);
        assert!(text.contains(key), "{key} not named in: {text}");
        assert!(!text.contains("file-password"), "{text}");
    }
    let no_sink = example_server().replace("debezium.sink.type=kafka", "");
    let err = server(&no_sink, &env).unwrap_err();
    assert!(
        chain(&err).contains("debezium.sink.type"),
        "{}",
        chain(&err)
    );
    let no_bootstrap: String = example_server()
        .lines()
        .filter(|l| !l.contains("bootstrap.servers"))
        .collect::<Vec<_>>()
        .join("\n");
    let err = server(&no_bootstrap, &env).unwrap_err();
    assert!(chain(&err).contains("debezium.sink.kafka.producer.bootstrap.servers"));
}

#[test]
fn quarkus_profiles() {
    let text = format!(
        "{}\n%prod.debezium.source.slot.name=prod_slot\n%dev.debezium.source.slot.name=dev_slot\n",
        example_server()
    );
    let env = |name: &str| (name == "PG_HOST").then(|| "h".to_owned());
    let t = server(&text, &env).unwrap();
    assert_eq!(t.config.replication.slot, "prod_slot");
    assert!(t.ignored("%dev.debezium.source.slot.name"));
}

#[test]
fn properties_parser_through_the_server_form() {
    // Continuations, `:` and whitespace separators, escapes, comments.
    let text = "! comment\n\
                debezium.sink.type : kafka\n\
                debezium.sink.kafka.producer.bootstrap.servers   a:1,\\\n    b:2\n\
                debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
                debezium.source.database.hostname=h\n\
                debezium.source.database.user=u\n\
                debezium.source.database.password=p\\u00e4ss\\\\word\n\
                debezium.source.database.dbname=d\n\
                debezium.source.plugin.name=pgoutput\n\
                debezium.source.topic.prefix=t\n\
                debezium.source.table.include.list=public.outbox\n\
                debezium.transforms=outbox\n\
                debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n";
    let c = server(text, &no_env).unwrap().config;
    assert_eq!(c.kafka.bootstrap_servers, "a:1,b:2");
    assert_eq!(c.postgres.password.as_ref().unwrap().expose(), "päss\\word");
}

#[test]
fn connector_json_rejects_nested_values() {
    assert!(parse_connector_json(r#"{"config":{"transforms":["outbox"]}}"#).is_err());
}

fn walrelay(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_walrelay"))
        .args(args)
        .env("PG_HOST", "h")
        .env_remove("DEBEZIUM_SOURCE_DATABASE_PASSWORD")
        .env("WALRELAY_LOG", "warn")
        .output()
        .unwrap()
}

#[test]
fn cli_validates_both_forms() {
    let server = data("application.properties");
    let out = walrelay(&["validate", "--config", server.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("debezium.source.offset.flush.interval.ms"),
        "{stderr}"
    );
    assert!(!stderr.contains("file-password"), "{stderr}");

    let worker = data("connect-standalone.properties");
    for connector in ["outbox-connector.properties", "outbox-connector.json"] {
        let connector = data(connector);
        let out = walrelay(&[
            "connect-standalone",
            "--validate",
            worker.to_str().unwrap(),
            connector.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("ok"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("offset.flush.interval.ms"), "{stderr}");
        assert!(!stderr.contains("s3cret"), "{stderr}");
    }

    // A refusal exits 2 and names the key.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("connector.properties");
    let text = std::fs::read_to_string(data("outbox-connector.properties"))
        .unwrap()
        .replace("plugin.name=pgoutput", "plugin.name=decoderbufs");
    std::fs::write(&bad, text).unwrap();
    let out = walrelay(&[
        "connect-standalone",
        "--validate",
        worker.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("plugin.name"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn native_toml_still_loads() {
    let c = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/walrelay.toml"));
    // The example reads its password from the environment; either it loads
    // or it names that key.
    match c {
        Ok(c) => assert_eq!(c.replication.publication_mode, PublicationMode::Table),
        Err(e) => assert!(chain(&e).contains("password_env"), "{}", chain(&e)),
    }
}

/// Placeholder environment for the shipped examples: values for plain
/// upper-case variables they reference, nothing that would override a key.
fn example_env(name: &str) -> Option<String> {
    let plain = !name.is_empty()
        && !name.starts_with("DEBEZIUM_")
        && !name.starts_with("QUARKUS_")
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    plain.then(|| "placeholder".to_owned())
}

#[test]
fn shipped_examples_translate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/debezium");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut workers = Vec::new();
    let mut connectors = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext == "properties" && text.contains("debezium.sink.type") {
            let t = from_server_text(&text, &path, &example_env)
                .unwrap_or_else(|e| panic!("{}: {}", path.display(), chain(&e)));
            assert!(t.config.debezium.server_mode);
        } else if (ext == "properties" || ext == "json") && text.contains("connector.class") {
            connectors.push(path);
        } else if ext == "properties" && text.contains("key.converter") {
            workers.push(path);
        }
    }
    for worker in &workers {
        for connector in &connectors {
            let t = load_connect(worker, connector).unwrap_or_else(|e| {
                panic!(
                    "{} + {}: {}",
                    worker.display(),
                    connector.display(),
                    chain(&e)
                )
            });
            assert!(!t.config.debezium.server_mode);
        }
    }
}

#[test]
fn connect_config_providers() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("pg.properties");
    std::fs::write(&secrets, "password=from-provider\n").unwrap();
    std::fs::write(dir.path().join("host"), "provided-host").unwrap();
    let mut worker = props("connect-standalone.properties");
    worker.insert("config.providers".into(), "file,dir".into());
    worker.insert(
        "config.providers.file.class".into(),
        "org.apache.kafka.common.config.provider.FileConfigProvider".into(),
    );
    worker.insert(
        "config.providers.dir.class".into(),
        "org.apache.kafka.common.config.provider.DirectoryConfigProvider".into(),
    );
    let mut connector = props("outbox-connector.properties");
    connector.insert(
        "database.password".into(),
        format!("${{file:{}:password}}", secrets.display()),
    );
    connector.insert(
        "database.hostname".into(),
        format!("${{dir:{}:host}}", dir.path().display()),
    );
    let c = connect(worker.clone(), connector.clone()).unwrap().config;
    assert_eq!(c.postgres.password.unwrap().expose(), "from-provider");
    assert_eq!(c.postgres.host, "provided-host");
    // The EventRouter's own `${routedByValue}` is no provider reference.
    assert_eq!(c.router.route_topic_replacement, "events.${routedByValue}");

    connector.insert(
        "database.password".into(),
        format!("${{file:{}:nokey}}", secrets.display()),
    );
    let err = connect(worker.clone(), connector).unwrap_err();
    assert!(chain(&err).contains("database.password"), "{}", chain(&err));

    worker.insert(
        "config.providers.dir.class".into(),
        "com.example.Vault".into(),
    );
    let err = connect(worker, props("outbox-connector.properties")).unwrap_err();
    assert!(
        chain(&err).contains("config.providers.dir.class"),
        "{}",
        chain(&err)
    );
}

#[test]
fn shipped_connect_example_field_by_field() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/debezium");
    let worker = dir.join("connect-standalone.properties");
    for connector in ["outbox-connector.properties", "outbox-connector.json"] {
        let t = load_connect(&worker, &dir.join(connector)).unwrap();
        let c = &t.config;
        assert_eq!(c.postgres.host, "localhost");
        assert_eq!(c.postgres.port, PortSetting::One(5432));
        assert_eq!(c.postgres.user, "debezium");
        assert_eq!(c.postgres.dbname, "app");
        assert_eq!(
            c.postgres
                .password
                .as_ref()
                .map(walrelay::secret::Secret::expose),
            Some("change-me")
        );
        assert_eq!(c.replication.slot, "debezium_outbox");
        assert_eq!(c.replication.publication, "debezium_outbox");
        assert_eq!(c.replication.publication_mode, PublicationMode::Filtered);
        assert_eq!(c.replication.publish, None);
        assert_eq!(c.replication.snapshot_mode, SnapshotMode::NoData);
        assert_eq!(c.outbox.table.as_deref(), Some("public.outbox"));
        assert_eq!(c.outbox.op_invalid_behavior, OpInvalidBehavior::Warn);
        assert_eq!(c.router.id_field, "id");
        assert_eq!(c.router.key_field, "aggregateid");
        assert_eq!(c.router.payload_field, "payload");
        assert_eq!(c.router.route_by_field, "aggregatetype");
        assert_eq!(
            c.router.route_topic_replacement,
            "outbox.event.${routedByValue}"
        );
        assert_eq!(c.converters.key, ConverterKind::String);
        assert_eq!(c.converters.value, ConverterKind::String);
        assert_eq!(c.converters.header, HeaderConverterKind::Simple);
        assert_eq!(c.debezium.topic_prefix, "app");
        assert!(c.debezium.extended_headers);
        assert!(!c.debezium.server_mode);
        assert_eq!(c.heartbeat.interval_ms, 0);
        assert_eq!(c.kafka.bootstrap_servers, "localhost:9092");
        assert!(c.kafka.producer.is_empty(), "{:?}", c.kafka.producer);
        assert!(c.kafka.secrets.is_empty());
        for key in [
            "offset.storage.file.filename",
            "offset.flush.interval.ms",
            "plugin.path",
            "plugin.discovery",
            "listeners",
        ] {
            assert!(t.ignored(key), "{key}: {:?}", t.ignored);
        }
        assert!(!format!("{t:?}").contains("change-me"));
    }
}

/// Debezium 3.6 validates `database.hostname` as one host name (letters,
/// digits, `-`, `_`, `.`), so a host list is refused by name, as Debezium
/// refuses it.
#[test]
fn debezium_takes_one_host() {
    for hosts in ["pg-a,pg-b", "pg-a:5433", "pg a"] {
        let mut connector = props("outbox-connector.properties");
        connector.insert("database.hostname".into(), hosts.into());
        let err = connect(props("connect-standalone.properties"), connector).unwrap_err();
        let text = chain(&err);
        assert!(text.contains("database.hostname"), "{text}");
        assert!(text.contains("postgres.host"), "{text}");
    }
    let t = connect(
        props("connect-standalone.properties"),
        props("outbox-connector.properties"),
    )
    .unwrap();
    assert_eq!(t.config.postgres.target_session_attrs, None);
    assert_eq!(
        t.config.postgres.effective_target_session_attrs(),
        TargetSessionAttrs::Any
    );
}

/// pgjdbc's `targetServerType`, passed through by Debezium from
/// `database.` or `driver.`, becomes `postgres.target_session_attrs`.
#[test]
fn target_server_type_maps_onto_target_session_attrs() {
    let target = |key: &str, value: &str| {
        let mut connector = props("outbox-connector.properties");
        connector.insert(key.into(), value.into());
        connect(props("connect-standalone.properties"), connector)
            .map(|t| t.config.postgres.target_session_attrs)
    };
    use TargetSessionAttrs as T;
    for (value, want) in [
        ("any", T::Any),
        ("primary", T::ReadWrite),
        ("master", T::ReadWrite),
        ("secondary", T::ReadOnly),
        ("slave", T::ReadOnly),
        ("preferPrimary", T::Any),
        ("preferSecondary", T::Any),
        ("preferSlave", T::Any),
    ] {
        for key in ["database.targetServerType", "driver.targetServerType"] {
            assert_eq!(target(key, value).unwrap(), Some(want), "{key}={value}");
        }
    }
    // Not taken as unknown or ignored keys.
    let mut connector = props("outbox-connector.properties");
    connector.insert("driver.targetServerType".into(), "primary".into());
    let t = connect(props("connect-standalone.properties"), connector).unwrap();
    assert!(!t.ignored("driver.targetServerType"));
    // database. wins over driver., as in Debezium's merge.
    let mut connector = props("outbox-connector.properties");
    connector.insert("database.targetServerType".into(), "secondary".into());
    connector.insert("driver.targetServerType".into(), "primary".into());
    let t = connect(props("connect-standalone.properties"), connector).unwrap();
    assert_eq!(t.config.postgres.target_session_attrs, Some(T::ReadOnly));
    // pgjdbc's names are exact; anything else is refused by name.
    for value in ["standby", "Primary", "read-write"] {
        let err = target("driver.targetServerType", value).unwrap_err();
        assert!(
            chain(&err).contains("driver.targetServerType"),
            "{}",
            chain(&err)
        );
    }
}

#[test]
fn debezium_server_target_server_type() {
    let text = example_server().replace(
        "debezium.source.plugin.name",
        "debezium.source.driver.targetServerType=primary\ndebezium.source.plugin.name",
    );
    let env = |name: &str| (name == "PG_HOST").then(|| "pg.internal".to_owned());
    let t = server(&text, &env).unwrap();
    assert_eq!(
        t.config.postgres.target_session_attrs,
        Some(TargetSessionAttrs::ReadWrite)
    );
}

/// Debezium Server's file with another sink than Kafka: the sink's keys
/// are read, a key walrelay does not know or cannot honour is refused by
/// name, and exactly-once is refused by the key that asks for it.
#[test]
fn debezium_server_nats_and_redis_sinks() {
    let env = |name: &str| (name == "PG_HOST").then(|| "h".to_owned());
    let without_kafka: String = example_server()
        .lines()
        .filter(|l| !l.starts_with("debezium.sink."))
        .collect::<Vec<_>>()
        .join("\n");
    let nats = format!(
        "{without_kafka}\ndebezium.sink.type=nats-jetstream\n\
         debezium.sink.nats-jetstream.url=nats://127.0.0.1:4222\n\
         debezium.sink.nats-jetstream.create-stream=true\n\
         debezium.sink.nats-jetstream.auth.user=u\n\
         debezium.sink.nats-jetstream.auth.password=nats-secret\n"
    );
    let t = server(&nats, &env).unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!format!("{:?}", t.config).contains("nats-secret"));
    let redis = format!(
        "{without_kafka}\ndebezium.sink.type=redis\n\
         debezium.sink.redis.address=127.0.0.1:6379\n\
         debezium.sink.redis.message.format=extended\n\
         debezium.sink.redis.memory.threshold.percentage=80\n"
    );
    let t = server(&redis, &env).unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(t.ignored("debezium.sink.redis.memory.threshold.percentage"));
    for (line, key) in [
        (
            "debezium.sink.redis.wait.enabled=true",
            "debezium.sink.redis.wait.enabled",
        ),
        (
            "debezium.sink.redis.cluster.enabled=true",
            "debezium.sink.redis.cluster.enabled",
        ),
        (
            "debezium.sink.redis.no.such.key=1",
            "debezium.sink.redis.no.such.key",
        ),
        (
            "debezium.sink.redis.message.format=fancy",
            "sink.redis.message_format",
        ),
    ] {
        let err = server(&format!("{redis}\n{line}\n"), &env)
            .err()
            .unwrap_or_else(|| panic!("{line} accepted"));
        assert!(
            chain(&err).contains(key),
            "{key} not named in: {}",
            chain(&err)
        );
    }
    let err = server(
        &format!("{nats}\ndebezium.sink.nats-jetstream.auth.tls.keystore=/k.jks\n"),
        &env,
    )
    .unwrap_err();
    assert!(chain(&err).contains("debezium.sink.nats-jetstream.auth.tls.keystore"));
    let err = server(
        &nats.replace(
            "debezium.sink.nats-jetstream.url=nats://127.0.0.1:4222\n",
            "",
        ),
        &env,
    )
    .unwrap_err();
    assert!(
        chain(&err).contains("debezium.sink.nats-jetstream.url"),
        "{}",
        chain(&err)
    );
    let stream = format!(
        "{without_kafka}\ndebezium.sink.type=rabbitmqstream\n\
         debezium.sink.rabbitmqstream.host=127.0.0.1\n\
         debezium.sink.rabbitmqstream.port=5552\n\
         debezium.sink.rabbitmqstream.password=stream-secret\n\
         debezium.sink.rabbitmqstream.producer.name=p1\n\
         debezium.sink.rabbitmqstream.maxConsumersByConnection=3\n"
    );
    let t = server(&stream, &env).unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!format!("{:?}", t.config).contains("stream-secret"));
    assert!(t.ignored("debezium.sink.rabbitmqstream.maxconsumersbyconnection"));
    for (line, key) in [
        (
            "debezium.sink.rabbitmqstream.superStream.enable=true",
            "debezium.sink.rabbitmqstream.superstream.enable",
        ),
        (
            "debezium.sink.rabbitmqstream.tls.enable=true",
            "debezium.sink.rabbitmqstream.tls.enable",
        ),
        (
            "debezium.sink.rabbitmqstream.no.such.key=1",
            "debezium.sink.rabbitmqstream.no.such.key",
        ),
    ] {
        let err = server(&format!("{stream}\n{line}\n"), &env)
            .err()
            .unwrap_or_else(|| panic!("{line} accepted"));
        assert!(
            chain(&err).contains(key),
            "{key} not named in: {}",
            chain(&err)
        );
    }
    let err = server(&nats.replace("nats-jetstream\n", "rocketmq\n"), &env).unwrap_err();
    assert!(
        chain(&err).contains("debezium.sink.type"),
        "{}",
        chain(&err)
    );
}

/// routingKey.source=key with a byte-array key format: Debezium Server
/// 3.6.1's rabbitmq sink stops on the first record ("Unexpected data type
/// '[B'"), so the file is refused at load, by name.
#[test]
fn debezium_server_rabbitmq_refuses_routing_by_a_byte_array_key() {
    let env = |name: &str| (name == "PG_HOST").then(|| "h".to_owned());
    let rabbitmq: String = example_server()
        .lines()
        .filter(|l| !l.starts_with("debezium.sink.") && !l.starts_with("debezium.format.key="))
        .chain([
            "debezium.sink.type=rabbitmq",
            "debezium.sink.rabbitmq.connection.host=127.0.0.1",
            "debezium.sink.rabbitmq.routingKey.source=key",
        ])
        .collect::<Vec<_>>()
        .join("\n");
    for format in ["jsonbytearray", "binary"] {
        let err = server(&format!("{rabbitmq}\ndebezium.format.key={format}\n"), &env)
            .err()
            .unwrap_or_else(|| panic!("{format} accepted"));
        let text = chain(&err);
        assert!(
            text.contains("debezium.sink.rabbitmq.routingkey.source")
                && text.contains(&format!("debezium.format.key={format}")),
            "{text}"
        );
    }
    for format in ["json", "simplestring"] {
        server(&format!("{rabbitmq}\ndebezium.format.key={format}\n"), &env)
            .unwrap_or_else(|e| panic!("{format}: {}", chain(&e)));
    }
}
