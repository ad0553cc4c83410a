//! Router tests. Debezium's own tests are named in comments where a test
//! here reproduces one (EventRouterTest, AbstractEventRouterTest via
//! OutboxEventRouterIT, DebeziumEngineIT). They never touch a server: the
//! router is pure, so its inputs are built here.

use bytes::Bytes;
use walrelay_proto::pgoutput::{ColumnValue, TupleData};
use walrelay_proto::{Lsn, RelationColumnInfo, RelationInfo};

use super::*;
use crate::connect::pg::oid;

fn new_router(cfg: RouterConfig) -> Router {
    Router::new(cfg, ConvertersConfig::default(), DebeziumConfig::default())
        .expect("test config is valid")
}

const UUID_OID: u32 = oid::UUID;
const VARCHAR_OID: u32 = oid::VARCHAR;
const JSONB_OID: u32 = oid::JSONB;

fn relation(id_oid: u32) -> Arc<RelationInfo> {
    let col = |name: &str, type_oid: u32| RelationColumnInfo {
        name: name.to_owned(),
        type_oid,
        type_modifier: -1,
        is_key: name == "id",
    };
    Arc::new(RelationInfo {
        id: 16384,
        namespace: "public".to_owned(),
        name: "outbox".to_owned(),
        replica_identity: b'd',
        columns: vec![
            col("id", id_oid),
            col("aggregatetype", VARCHAR_OID),
            col("aggregateid", VARCHAR_OID),
            col("type", VARCHAR_OID),
            col("payload", JSONB_OID),
        ],
    })
}

fn text(s: &str) -> ColumnValue {
    ColumnValue::Text(Bytes::copy_from_slice(s.as_bytes()))
}

fn row(
    id: ColumnValue,
    aggregatetype: ColumnValue,
    key: ColumnValue,
    payload: ColumnValue,
) -> TupleData {
    TupleData {
        columns: vec![id, aggregatetype, key, text("UserCreated"), payload],
    }
}

fn user_row() -> TupleData {
    row(
        text("59a42efd-b015-44a9-9dde-cb36d9002425"),
        text("User"),
        text("10711fa5"),
        text("{\"email\": \"gh@mefi.in\"}"),
    )
}

fn meta() -> EventMeta {
    EventMeta {
        lsn: Lsn(0x16_B374_D848),
        commit_lsn: Lsn(0x16_B374_D900),
        xid: 42,
        commit_time_us: 1_700_000_000_000_000,
        received_us: 0,
        last_commit_lsn: None,
    }
}

fn router(regex: &str, replacement: &str) -> Router {
    new_router(RouterConfig {
        route_topic_regex: regex.to_owned(),
        route_topic_replacement: replacement.to_owned(),
        ..RouterConfig::default()
    })
}

/// The topic `RegexRouter` computes for `value`, also when it is not a
/// legal Kafka topic name (the router then refuses the event, naming it).
fn topic_for(router: &mut Router, value: &str) -> String {
    let rel = relation(UUID_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    let r = row(text("1"), text(value), text("k"), text("{}"));
    match router.route(&bound, &r, &meta()).map(Option::unwrap) {
        Ok(rec) => rec.topic.to_string(),
        Err(RouteError::InvalidTopic { topic, .. }) => topic,
        Err(e) => panic!("routes: {e}"),
    }
}

#[test]
fn default_record() {
    let mut router = new_router(RouterConfig::default());
    let rel = relation(UUID_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    let rec = router
        .route(&bound, &user_row(), &meta())
        .map(Option::unwrap)
        .expect("routes");
    assert_eq!(&*rec.topic, "outbox.event.User");
    assert_eq!(rec.key.as_deref(), Some(&b"10711fa5"[..]));
    assert_eq!(
        rec.value.as_deref(),
        Some(&b"{\"email\": \"gh@mefi.in\"}"[..])
    );
    assert_eq!(rec.headers.len(), 1);
    assert_eq!(&*rec.headers[0].name, "id");
    assert_eq!(
        rec.headers[0].value.as_deref(),
        Some(&b"59a42efd-b015-44a9-9dde-cb36d9002425"[..])
    );
    assert_eq!(rec.partition, None);
    assert_eq!(rec.timestamp_ms, None);
    // The second event of the same aggregate type shares the topic string.
    let again = router
        .route(&bound, &user_row(), &meta())
        .map(Option::unwrap)
        .expect("routes");
    assert!(Arc::ptr_eq(&rec.topic, &again.topic));
    assert!(Arc::ptr_eq(&rec.headers[0].name, &again.headers[0].name));
}

#[test]
fn key_and_value_are_zero_copy() {
    let mut router = new_router(RouterConfig::default());
    let rel = relation(UUID_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    let r = user_row();
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect("routes");
    let (Some(ColumnValue::Text(k)), Some(ColumnValue::Text(p))) = (r.get(2), r.get(4)) else {
        panic!("test row has text key and payload");
    };
    assert_eq!(rec.key.as_ref().map(|b| b.as_ptr()), Some(k.as_ptr()));
    assert_eq!(rec.value.as_ref().map(|b| b.as_ptr()), Some(p.as_ptr()));
}

#[test]
fn custom_regex_numbered_group() {
    let mut r = router("(.*)Event", "events.$1");
    assert_eq!(topic_for(&mut r, "OrderEvent"), "events.Order");
}

#[test]
fn custom_regex_named_group() {
    let mut r = router("(?<kind>[a-z]+)-(?<ver>v[0-9]+)", "t.${ver}.${kind}");
    assert_eq!(topic_for(&mut r, "order-v2"), "t.v2.order");
}

#[test]
fn escaped_dollar_and_backslash() {
    let mut r = router("(.*)", "cost\\$.$1\\\\x");
    assert_eq!(topic_for(&mut r, "A"), "cost$.A\\x");
}

#[test]
fn greedy_group_digits_stop_at_existing_groups() {
    // One group: "$10" is group 1 followed by a literal 0.
    let mut r = router("(.*)", "t.$10");
    assert_eq!(topic_for(&mut r, "A"), "t.A0");
}

#[test]
fn replace_first_uses_the_first_match_not_the_full_one() {
    // matches() holds via "ab", but replaceFirst rewrites only the "a".
    let mut r = router("a|ab", "X");
    assert_eq!(topic_for(&mut r, "ab"), "Xb");
}

#[test]
fn non_matching_value_stays_raw() {
    let mut r = router("order-(.*)", "orders.$1");
    assert_eq!(topic_for(&mut r, "user-1"), "user-1");
    // a partial match is not a match
    assert_eq!(topic_for(&mut r, "xorder-1"), "xorder-1");
}

#[test]
fn value_with_line_terminator_stays_raw_under_default_regex() {
    let mut r = new_router(RouterConfig::default());
    assert_eq!(topic_for(&mut r, "Us\ner"), "Us\ner");
    assert_eq!(topic_for(&mut r, "User\r"), "User\r");
}

#[test]
fn null_payload_is_a_tombstone_and_null_key_is_null() {
    let mut router = new_router(RouterConfig {
        null_key: NullPolicy::Allow,
        ..RouterConfig::default()
    });
    let rel = relation(UUID_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    let r = row(
        text("1"),
        text("User"),
        ColumnValue::Null,
        ColumnValue::Null,
    );
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect("routes");
    assert_eq!(rec.key, None);
    assert_eq!(rec.value, None);
    assert_eq!(&*rec.topic, "outbox.event.User");
}

#[test]
fn bool_id_header_is_java_boolean_text() {
    let mut router = new_router(RouterConfig::default());
    let rel = relation(oid::BOOL);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    for (pg, java) in [("t", "true"), ("f", "false")] {
        let r = row(text(pg), text("User"), text("k"), text("{}"));
        let rec = router
            .route(&bound, &r, &meta())
            .map(Option::unwrap)
            .expect("routes");
        assert_eq!(rec.headers[0].value.as_deref(), Some(java.as_bytes()));
    }
    // Only bool columns are rewritten.
    let rel = relation(VARCHAR_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    let r = row(text("t"), text("User"), text("k"), text("{}"));
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect("routes");
    assert_eq!(rec.headers[0].value.as_deref(), Some(&b"t"[..]));
}

#[test]
fn missing_column_names_column_and_key() {
    let router = new_router(RouterConfig::default());
    let mut rel = (*relation(UUID_OID)).clone();
    rel.columns.retain(|c| c.name != "aggregateid");
    let rel = Arc::new(rel);
    let err = router
        .check_layout(&rel, &TableMeta::unknown())
        .expect_err("column missing");
    assert_eq!(
        err.to_string(),
        "outbox table public.outbox has no column \"aggregateid\" (table.field.event.key)"
    );
    // Bound anyway: every event of the relation is an error naming the
    // event, its LSN and the column (a column dropped while streaming).
    let mut router = router;
    let bound = router.bind(&rel, &TableMeta::unknown()).expect("binds");
    assert_eq!(bound.problem(), Some(&err));
    let r = TupleData {
        columns: vec![text("e7"), text("User"), text("UserCreated"), text("{}")],
    };
    let routed = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("layout");
    assert_eq!(routed.kind(), "missing_column");
    assert_eq!(routed.column(), Some("aggregateid"));
    let msg = routed.to_string();
    assert!(
        msg.contains("e7") && msg.contains("16/B374D848") && msg.contains("aggregateid"),
        "{msg}"
    );
    assert_eq!(
        bound.original(&r),
        (None, Some(Bytes::from_static(b"{}"))),
        "the payload's original bytes are still there for a dead-letter record"
    );
    assert_eq!(
        router.intended_topic(&bound, &r).as_deref(),
        Some("outbox.event.User")
    );
}

#[test]
fn per_event_errors_carry_context() {
    let mut router = new_router(RouterConfig {
        null_id: NullPolicy::Allow,
        ..RouterConfig::default()
    });
    let rel = relation(UUID_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");

    // Debezium adds a null `id` header for a NULL id (nullable column).
    let r = row(ColumnValue::Null, text("User"), text("k"), text("{}"));
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect("null id routes");
    assert_eq!(rec.headers[0].value, None);

    let r = row(text("e1"), ColumnValue::Null, text("k"), text("{}"));
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("null route");
    let msg = err.to_string();
    assert!(
        msg.contains("\"aggregatetype\"") && msg.contains("e1") && msg.contains("16/B374D848"),
        "{msg}"
    );

    let r = row(
        text("e2"),
        ColumnValue::Text(Bytes::from_static(b"\xff")),
        text("k"),
        text("{}"),
    );
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("non-utf-8 route");
    assert!(matches!(err, RouteError::NonUtf8RouteValue { ref event_id, .. } if event_id == "e2"));

    let r = row(
        text("e3"),
        text("User"),
        text("k"),
        ColumnValue::UnchangedToast,
    );
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("toast");
    assert!(err.to_string().contains("only for updates"), "{err}");

    let r = row(
        text("e4"),
        text("User"),
        ColumnValue::Binary(Bytes::from_static(b"k")),
        text("{}"),
    );
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("binary");
    assert!(
        err.to_string()
            .starts_with("binary pgoutput values are not supported for column \"aggregateid\""),
        "{err}"
    );

    let r = TupleData {
        columns: vec![text("e5"), text("User")],
    };
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("short row");
    assert!(matches!(
        err,
        RouteError::ShortRow {
            index: 2,
            width: 2,
            ..
        }
    ));
}

#[test]
fn topic_cache_is_bounded() {
    let mut r = new_router(RouterConfig::default());
    for i in 0..(TOPIC_CACHE_LIMIT + 5) {
        topic_for(&mut r, &format!("T{i}"));
    }
    assert!(r.topics.len() <= TOPIC_CACHE_LIMIT);
    assert_eq!(topic_for(&mut r, "T1"), "outbox.event.T1");
}

fn config_error(cfg: RouterConfig) -> RouteConfigError {
    cfg.validate().expect_err("config is invalid")
}

#[test]
fn validate_names_the_bad_key() {
    let err = config_error(RouterConfig {
        key_field: String::new(),
        ..RouterConfig::default()
    });
    assert_eq!(
        err.to_string(),
        "table.field.event.key must name a column, but it is empty"
    );

    let err = config_error(RouterConfig {
        route_topic_regex: " [[a-z]".to_owned(),
        ..RouterConfig::default()
    });
    assert!(matches!(
        err,
        RouteConfigError::InvalidRegex {
            key: "route.topic.regex",
            ..
        }
    ));
    assert!(err.to_string().starts_with("route.topic.regex"), "{err}");

    // Java-only syntax is refused rather than misread.
    let err = config_error(RouterConfig {
        route_topic_regex: "(?=x)x".to_owned(),
        ..RouterConfig::default()
    });
    assert!(matches!(err, RouteConfigError::InvalidRegex { .. }));

    for (replacement, needle) in [
        ("t.$2", "no group 2"),
        ("t.${other}", "no group named {other}"),
        ("t.\\", "escaped is missing"),
        ("t.$", "group index is missing"),
        ("t.${routedByValue", "missing its '}'"),
        ("t.${}", "empty name"),
        ("t.$x", "group number"),
    ] {
        let err = config_error(RouterConfig {
            route_topic_replacement: replacement.to_owned(),
            ..RouterConfig::default()
        });
        let msg = err.to_string();
        assert!(
            msg.starts_with("route.topic.replacement is invalid"),
            "{replacement}: {msg}"
        );
        assert!(msg.contains(needle), "{replacement}: {msg}");
    }
}

#[test]
fn config_deserializes_with_defaults_and_refuses_unknown_keys() {
    let cfg: RouterConfig =
        serde_json::from_str(r#"{"route_by_field": "kind"}"#).expect("valid json");
    assert_eq!(cfg.route_by_field, "kind");
    assert_eq!(cfg.id_field, DEFAULT_ID_FIELD);
    assert!(serde_json::from_str::<RouterConfig>(r#"{"nope": 1}"#).is_err());
}

// ---- the general path: converters, placements, envelope, expansion ----

fn table(cols: &[(&str, u32, i32)]) -> Arc<RelationInfo> {
    Arc::new(RelationInfo {
        id: 16385,
        namespace: "outboxsmtit".to_owned(),
        name: "outbox".to_owned(),
        replica_identity: b'd',
        columns: cols
            .iter()
            .map(|(name, type_oid, type_modifier)| RelationColumnInfo {
                name: (*name).to_owned(),
                type_oid: *type_oid,
                type_modifier: *type_modifier,
                is_key: *name == "id",
            })
            .collect(),
    })
}

/// OutboxEventRouterIT's table: `id uuid pk, aggregatetype varchar,
/// aggregateid varchar, type varchar, payload jsonb` plus the
/// shouldSupportAllFeatures columns.
fn it_table() -> Arc<RelationInfo> {
    table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, 259),
        ("aggregateid", oid::VARCHAR, 259),
        ("type", oid::VARCHAR, 259),
        ("payload", oid::JSONB, -1),
        ("version", oid::INT4, -1),
        ("somebooltype", oid::BOOL, -1),
        ("createdat", oid::TIMESTAMP, -1),
        ("is_deleted", oid::BOOL, -1),
    ])
}

fn it_meta() -> TableMeta {
    let col = |name: &str, not_null: bool, default: Option<&str>| ColumnMeta {
        name: name.to_owned(),
        not_null,
        type_name: None,
        default_expr: default.map(str::to_owned),
    };
    TableMeta::new(vec![
        col("id", true, None),
        col("aggregatetype", true, None),
        col("aggregateid", true, None),
        col("type", true, None),
        col("payload", false, None),
        col("version", true, None),
        col("somebooltype", true, None),
        col("createdat", true, None),
        col("is_deleted", false, Some("false")),
    ])
}

fn it_row(aggregatetype: &str, payload: Option<&str>) -> TupleData {
    let t = |s: &str| text(s);
    TupleData {
        columns: vec![
            t("59a42efd-b015-44a9-9dde-cb36d9002425"),
            t(aggregatetype),
            t("10711fa5"),
            t("UserEmailChanged"),
            payload.map_or(ColumnValue::Null, t),
            t("1"),
            t("t"),
            t("2019-03-24 20:52:59"),
            ColumnValue::Null,
        ],
    }
}

fn converters(key: ConverterKind, value: ConverterKind, schemas: bool) -> ConvertersConfig {
    ConvertersConfig {
        key,
        key_schemas_enable: schemas,
        value,
        value_schemas_enable: schemas,
        header: HeaderConverterKind::Simple,
        header_schemas_enable: true,
    }
}

fn router_with(cfg: RouterConfig, conv: ConvertersConfig, debezium: DebeziumConfig) -> Router {
    Router::new(cfg, conv, debezium).expect("valid config")
}

fn it_debezium() -> DebeziumConfig {
    DebeziumConfig {
        topic_prefix: "test_server".to_owned(),
        ..DebeziumConfig::default()
    }
}

fn s(b: &Option<Bytes>) -> &str {
    std::str::from_utf8(b.as_deref().expect("bytes")).expect("utf-8")
}

fn header<'a>(rec: &'a KafkaRecord, name: &str) -> &'a Option<Bytes> {
    &rec.headers
        .iter()
        .find(|h| &*h.name == name)
        .expect("header present")
        .value
}

fn route_it(router: &mut Router, r: &TupleData) -> Result<KafkaRecord, RouteError> {
    let bound = router.bind(&it_table(), &it_meta())?;
    router.route(&bound, r, &meta()).map(Option::unwrap)
}

const EMAIL: &str = "{\"email\": \"gh@mefi.in\"}";

// The JsonConverter bytes Debezium puts on the wire for the `10711fa5`
// example (tests/compat/observed.md).
#[test]
fn json_converter_key_and_value() {
    let mut router = router_with(
        RouterConfig::default(),
        converters(ConverterKind::Json, ConverterKind::Json, true),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(
        s(&rec.key),
        r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#
    );
    assert_eq!(
        s(&rec.value),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"email\": \"gh@mefi.in\"}"}"#
    );
    let mut router = router_with(
        RouterConfig::default(),
        converters(ConverterKind::Json, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(s(&rec.key), "\"10711fa5\"");
    assert_eq!(s(&rec.value), r#""{\"email\": \"gh@mefi.in\"}""#);
    // A NULL payload is the 4 bytes `null`, not a tombstone.
    let rec = route_it(&mut router, &it_row("User", None)).unwrap();
    assert_eq!(s(&rec.value), "null");
}

// shouldConsumeRecordsFromInsert + the StringConverter row of the wire table.
#[test]
fn string_converter_passes_text() {
    let mut router = router_with(
        RouterConfig::default(),
        ConvertersConfig::default(),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(&*rec.topic, "outbox.event.User");
    assert_eq!(s(&rec.key), "10711fa5");
    assert_eq!(s(&rec.value), EMAIL);
    assert_eq!(
        s(header(&rec, "id")),
        "59a42efd-b015-44a9-9dde-cb36d9002425"
    );
}

#[test]
fn json_header_converter_id() {
    let conv = ConvertersConfig {
        header: HeaderConverterKind::Json,
        ..ConvertersConfig::default()
    };
    let mut router = router_with(RouterConfig::default(), conv, it_debezium());
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(
        s(header(&rec, "id")),
        r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"59a42efd-b015-44a9-9dde-cb36d9002425"}"#
    );
}

fn placements(p: &str) -> RouterConfig {
    RouterConfig {
        additional_placement: Some(p.to_owned()),
        ..RouterConfig::default()
    }
}

// compat doc: envelope `type:envelope:eventType` + JsonConverter schemas.enable=false;
// shouldSendEventTypeAsValue, canSetPayloadTypeIntoTheEnvelopeWithAlias.
#[test]
fn envelope_with_alias() {
    let mut router = router_with(
        placements("type:envelope:eventType"),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("UserEmail", Some(EMAIL))).unwrap();
    assert_eq!(
        s(&rec.value),
        r#"{"payload":"{\"email\": \"gh@mefi.in\"}","eventType":"UserEmailChanged"}"#
    );
}

// shouldSupportAllFeatures: schema name, version, fields, default, timestamp, headers.
#[test]
fn supports_all_features() {
    let cfg = RouterConfig {
        schema_version_field: Some("version".to_owned()),
        timestamp_field: Some("createdat".to_owned()),
        additional_placement: Some(
            "version:envelope:eventVersion,aggregatetype:envelope:aggregateType,somebooltype:envelope:someBoolType,somebooltype:header,is_deleted:envelope:deleted"
                .to_owned(),
        ),
        ..RouterConfig::default()
    };
    let mut router = router_with(
        cfg,
        converters(ConverterKind::String, ConverterKind::Json, true),
        DebeziumConfig {
            extended_headers: true,
            ..it_debezium()
        },
    );
    let rec = route_it(&mut router, &it_row("UserEmail", Some(EMAIL))).unwrap();
    assert_eq!(
        s(&rec.value),
        concat!(
            r#"{"schema":{"type":"struct","fields":["#,
            r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},"#,
            r#"{"type":"int32","optional":false,"field":"eventVersion"},"#,
            r#"{"type":"string","optional":false,"field":"aggregateType"},"#,
            r#"{"type":"boolean","optional":false,"field":"someBoolType"},"#,
            r#"{"type":"boolean","optional":true,"default":false,"field":"deleted"}],"#,
            r#""optional":false,"name":"test_server.outboxsmtit.outbox.UserEmail.Value","version":1},"#,
            r#""payload":{"payload":"{\"email\": \"gh@mefi.in\"}","eventVersion":1,"aggregateType":"UserEmail","someBoolType":true,"deleted":false}}"#
        )
    );
    assert_eq!(rec.timestamp_ms, Some(1_553_460_779_000));
    // 4 context headers + id + somebooltype (the IT counts 6 with 3.3's three context headers)
    let names: Vec<&str> = rec.headers.iter().map(|h| &*h.name).collect();
    assert_eq!(
        names,
        [
            HEADER_CONNECTOR_LOGICAL_NAME,
            HEADER_TASK_ID,
            HEADER_CONNECTOR_NAME,
            HEADER_RUN_ID,
            "id",
            "somebooltype"
        ]
    );
    assert_eq!(
        s(header(&rec, HEADER_CONNECTOR_LOGICAL_NAME)),
        "test_server"
    );
    assert_eq!(s(header(&rec, HEADER_TASK_ID)), "0");
    assert_eq!(s(header(&rec, HEADER_CONNECTOR_NAME)), "postgresql");
    assert_eq!(s(header(&rec, HEADER_RUN_ID)).len(), 36);
    assert_eq!(s(header(&rec, "somebooltype")), "true");
}

#[test]
fn run_id_is_per_router() {
    let d = DebeziumConfig {
        extended_headers: true,
        ..it_debezium()
    };
    let mut a = router_with(
        RouterConfig::default(),
        ConvertersConfig::default(),
        d.clone(),
    );
    let mut b = router_with(RouterConfig::default(), ConvertersConfig::default(), d);
    let ra = route_it(&mut a, &it_row("User", Some(EMAIL))).unwrap();
    let ra2 = route_it(&mut a, &it_row("User", Some(EMAIL))).unwrap();
    let rb = route_it(&mut b, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(header(&ra, HEADER_RUN_ID), header(&ra2, HEADER_RUN_ID));
    assert_ne!(header(&ra, HEADER_RUN_ID), header(&rb, HEADER_RUN_ID));
}

// The schema cache is keyed by payload schema only: the first route value names it.
#[test]
fn envelope_schema_name_uses_first_route_value() {
    let mut router = router_with(
        placements("type:envelope:eventType"),
        converters(ConverterKind::String, ConverterKind::Json, true),
        it_debezium(),
    );
    let first = route_it(&mut router, &it_row("UserEmail", Some(EMAIL))).unwrap();
    let second = route_it(&mut router, &it_row("Address", Some(EMAIL))).unwrap();
    assert_eq!(&*second.topic, "outbox.event.Address");
    for rec in [&first, &second] {
        assert!(
            s(&rec.value).contains(r#""name":"test_server.outboxsmtit.outbox.UserEmail.Value""#),
            "{}",
            s(&rec.value)
        );
    }
}

// canSetSchemaVersionWhenMoreThanPayloadIsInEnvelope / shouldNotSetSchemaVersionByDefault
#[test]
fn schema_version_only_in_envelope() {
    let mut cfg = placements("type:envelope:eventType");
    cfg.schema_version_field = Some("version".to_owned());
    let mut router = router_with(
        cfg,
        converters(ConverterKind::String, ConverterKind::Json, true),
        it_debezium(),
    );
    let mut r = it_row("User", Some(EMAIL));
    r.columns[5] = text("3");
    let rec = route_it(&mut router, &r).unwrap();
    assert!(s(&rec.value)
        .contains(r#""name":"test_server.outboxsmtit.outbox.User.Value","version":3}"#));
    // Without an envelope field the version column is not even read.
    let mut router = router_with(
        RouterConfig {
            schema_version_field: Some("nope".to_owned()),
            ..RouterConfig::default()
        },
        converters(ConverterKind::String, ConverterKind::Json, true),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(
        s(&rec.value),
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"email\": \"gh@mefi.in\"}"}"#
    );
}

// shouldProduceTombstoneEventForNullPayload / shouldNotProduceTombstoneEventForNullPayload /
// canMarkAnEventAsDeleted / noTombstoneIfNotConfigured / shouldProduceTombstoneEventForEmptyPayload
#[test]
fn tombstones() {
    let tomb = |envelope: bool| {
        let mut cfg = if envelope {
            placements("is_deleted:envelope:deleted")
        } else {
            RouterConfig::default()
        };
        cfg.route_tombstone_on_empty_payload = true;
        cfg
    };
    for envelope in [false, true] {
        for conv in [ConverterKind::String, ConverterKind::Json] {
            let mut router =
                router_with(tomb(envelope), converters(conv, conv, true), it_debezium());
            for payload in [None, Some(""), Some(" \t\n")] {
                let rec = route_it(&mut router, &it_row("User", payload)).unwrap();
                assert_eq!(rec.value, None, "{envelope} {conv:?} {payload:?}");
                assert!(rec.key.is_some());
                assert_eq!(rec.headers.len(), 1);
            }
            let rec = route_it(&mut router, &it_row("User", Some(" {} "))).unwrap();
            assert!(rec.value.is_some());
        }
    }
    // Not configured: the envelope keeps a null payload and deleted=false.
    let mut router = router_with(
        placements("is_deleted:envelope:deleted"),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", None)).unwrap();
    assert_eq!(s(&rec.value), r#"{"payload":null,"deleted":false}"#);
}

// canSetPartitionWithAdditionalFields
#[test]
fn partition_placement() {
    let mut router = router_with(
        placements("version:partition"),
        ConvertersConfig::default(),
        it_debezium(),
    );
    let mut r = it_row("User", Some(EMAIL));
    r.columns[5] = text("123");
    let rec = route_it(&mut router, &r).unwrap();
    assert_eq!(rec.partition, Some(123));
    assert_eq!(s(&rec.value), EMAIL);
    // The column must be INT32.
    let router = router_with(
        placements("type:partition"),
        ConvertersConfig::default(),
        it_debezium(),
    );
    let err = router.check_layout(&it_table(), &it_meta()).unwrap_err();
    assert!(matches!(err, RouteError::WrongColumnType { .. }), "{err}");
}

// canSetTimestampByUserDefinedConfiguration / shouldConvertMicrosecondsTimestampToMilliseconds /
// canSetTimestampFromDebeziumEnvelopeByDefault (processing time = None here)
#[test]
fn timestamp_logical_types() {
    let ts = |typmod: i32, value: Option<&str>| {
        let rel = table(&[
            ("id", oid::UUID, -1),
            ("aggregatetype", oid::VARCHAR, -1),
            ("aggregateid", oid::VARCHAR, -1),
            ("payload", oid::JSONB, -1),
            ("ts", oid::TIMESTAMP, typmod),
        ]);
        let mut router = new_router(RouterConfig {
            timestamp_field: Some("ts".to_owned()),
            ..RouterConfig::default()
        });
        let bound = router.bind(&rel, &TableMeta::unknown()).unwrap();
        let r = TupleData {
            columns: vec![
                text("e"),
                text("User"),
                text("k"),
                text("{}"),
                value.map_or(ColumnValue::Null, text),
            ],
        };
        router
            .route(&bound, &r, &meta())
            .map(Option::unwrap)
            .unwrap()
            .timestamp_ms
    };
    assert_eq!(
        ts(-1, Some("2019-03-24 20:52:59.123456")),
        Some(1_553_460_779_123)
    );
    assert_eq!(
        ts(3, Some("2019-03-24 20:52:59.123")),
        Some(1_553_460_779_123)
    );
    assert_eq!(
        ts(-1, Some("1969-12-31 23:59:59.9995")),
        Some(0),
        "truncates toward zero like Java"
    );
    assert_eq!(ts(-1, None), None);
    let mut router = new_router(RouterConfig::default());
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(rec.timestamp_ms, None);
    // timestamptz is a string (ZonedTimestamp): refused at bind.
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", oid::JSONB, -1),
        ("ts", oid::TIMESTAMPTZ, -1),
    ]);
    let router = new_router(RouterConfig {
        timestamp_field: Some("ts".to_owned()),
        ..RouterConfig::default()
    });
    let err = router
        .check_layout(&rel, &TableMeta::unknown())
        .unwrap_err();
    assert!(
        err.to_string().contains("table.field.event.timestamp"),
        "{err}"
    );
}

// shouldSendEventTypeAsHeader / canSetMultipleFieldsIntoTheEnvelope / canConfigureEveryTableField
#[test]
fn header_placements_in_config_order() {
    let mut router = router_with(
        placements("type:header:eventType, aggregatetype:envelope:payloadType, aggregateid:header:payloadId"),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    let names: Vec<&str> = rec.headers.iter().map(|h| &*h.name).collect();
    assert_eq!(names, ["id", "eventType", "payloadId"]);
    assert_eq!(s(header(&rec, "eventType")), "UserEmailChanged");
    assert_eq!(
        s(&rec.value),
        r#"{"payload":"{\"email\": \"gh@mefi.in\"}","payloadType":"User"}"#
    );
    // Header-only placements keep the payload as is (fast path).
    let mut router = router_with(
        placements("type:header:eventType"),
        ConvertersConfig::default(),
        it_debezium(),
    );
    let r = it_row("User", Some(EMAIL));
    let rec = route_it(&mut router, &r).unwrap();
    assert_eq!(s(&rec.value), EMAIL);
    assert_eq!(rec.headers.len(), 2);
}

// canSetFieldIntoTheEnvelopeWithMissingField / shouldFailOnMissingField
#[test]
fn additional_missing() {
    let mut cfg = placements("nope:envelope:x,type:header:eventType,nope2:header");
    let router = router_with(cfg.clone(), ConvertersConfig::default(), it_debezium());
    let err = router.check_layout(&it_table(), &it_meta()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "outbox table outboxsmtit.outbox has no column \"nope\" (table.fields.additional.placement)"
    );
    cfg.additional_missing = AdditionalMissing::Ignore;
    let mut router = router_with(
        cfg,
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(rec.headers.len(), 2);
    // The envelope placement's column is missing, so only `payload` is left, as Debezium builds it.
    assert_eq!(
        s(&rec.value),
        r#"{"payload":"{\"email\": \"gh@mefi.in\"}"}"#
    );
}

// canExpandJsonPayloadIfConfigured / shouldNotExpandJSONPayloadIfNotConfigured /
// canExpandJsonPayloadWithAdditionalFieldInEnvelope / shouldNotWarnOnNullPayloadWhenExpandJsonPayloadEnabled
#[test]
fn expand_json_payload() {
    let expand = |p: Option<&str>| RouterConfig {
        expand_json_payload: true,
        additional_placement: p.map(str::to_owned),
        ..RouterConfig::default()
    };
    let mut router = router_with(
        expand(None),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(
        &mut router,
        &it_row(
            "User",
            Some(r#"{"email": "gh@mefi.in", "n": null, "a": []}"#),
        ),
    )
    .unwrap();
    assert_eq!(s(&rec.value), r#"{"email":"gh@mefi.in"}"#);
    let rec = route_it(&mut router, &it_row("User", None)).unwrap();
    assert_eq!(s(&rec.value), "null");
    assert_eq!(router.expansion_failures(), 0);
    // Not JSON: an error naming the event by default...
    let err = route_it(&mut router, &it_row("User", Some("{oops"))).unwrap_err();
    assert_eq!(err.kind(), "invalid_json");
    assert_eq!(err.column(), Some("payload"));
    // ...or, as Debezium does, the string is kept and counted.
    let mut router = router_with(
        RouterConfig {
            invalid_json_payload: InvalidJsonPolicy::Pass,
            ..expand(None)
        },
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some("{oops"))).unwrap();
    assert_eq!(s(&rec.value), r#""{oops""#);
    assert_eq!(router.expansion_failures(), 1);
    // Valid JSON that is not expanded (a scalar) is sent as text either way.
    let mut router = router_with(
        expand(None),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some("\"just\""))).unwrap();
    assert_eq!(s(&rec.value), r#""\"just\"""#);

    let mut router = router_with(
        expand(Some("type:envelope:eventType")),
        converters(ConverterKind::String, ConverterKind::Json, true),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(
        s(&rec.value),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"string","optional":true,"field":"email"}],"#,
            r#""optional":true,"name":"payload","field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"#,
            r#""optional":false,"name":"test_server.outboxsmtit.outbox.User.Value"},"#,
            r#""payload":{"payload":{"email":"gh@mefi.in"},"eventType":"UserEmailChanged"}}"#
        )
    );
    // With StringConverter the expanded struct is Struct.toString().
    let mut router = router_with(expand(None), ConvertersConfig::default(), it_debezium());
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(s(&rec.value), "Struct{email=gh@mefi.in}");
    // Not configured: the text stays.
    let mut router = router_with(
        RouterConfig::default(),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(s(&rec.value), r#""{\"email\": \"gh@mefi.in\"}""#);
}

// canInfluenceTableColumnTypes / canPassIntKey / canPassBinaryMessage /
// DebeziumEngineIT.shouldSerializeArbitraryPayloadFromOutbox
#[test]
fn column_types_flow_through() {
    let rel = table(&[
        ("id", oid::INT4, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::INT4, -1),
        ("payload", oid::BYTEA, -1),
        ("some_boolean", oid::BOOL, -1),
    ]);
    let r = TupleData {
        columns: vec![
            text("2"),
            text("routename"),
            text("1232"),
            text("\\x76616c756531"),
            text("t"),
        ],
    };
    let mut router = router_with(
        RouterConfig::default(),
        converters(ConverterKind::String, ConverterKind::BinaryData, true),
        DebeziumConfig::default(),
    );
    let bound = router.bind(&rel, &TableMeta::unknown()).unwrap();
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .unwrap();
    assert_eq!(&*rec.topic, "outbox.event.routename");
    assert_eq!(s(&rec.key), "1232");
    assert_eq!(rec.value.as_deref(), Some(&b"value1"[..]));
    assert_eq!(s(header(&rec, "id")), "2");

    let mut router = router_with(
        placements("some_boolean:envelope:bool"),
        converters(ConverterKind::Json, ConverterKind::Json, false),
        DebeziumConfig::default(),
    );
    let bound = router.bind(&rel, &TableMeta::unknown()).unwrap();
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .unwrap();
    assert_eq!(s(&rec.key), "1232");
    assert_eq!(s(&rec.value), r#"{"payload":"dmFsdWUx","bool":true}"#);

    // StringConverter cannot carry bytes (Java would print an identity hash).
    let mut router = new_router(RouterConfig::default());
    let bound = router.bind(&rel, &TableMeta::unknown()).unwrap();
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .unwrap_err();
    assert!(
        matches!(err, RouteError::Convert { ref what, .. } if what == "value"),
        "{err}"
    );
}

#[test]
fn unmappable_and_mistyped_columns_are_named() {
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", 600, -1),
    ]);
    let router = new_router(RouterConfig::default());
    let meta = TableMeta::new(vec![ColumnMeta {
        name: "payload".into(),
        not_null: false,
        type_name: Some("point".into()),
        default_expr: None,
    }]);
    let err = router.check_layout(&rel, &meta).unwrap_err();
    assert_eq!(
        err.to_string(),
        "outbox column outboxsmtit.outbox.\"payload\" (table.field.event.payload) has type oid 600 (the catalog said point at session start), which walrelay cannot map to a kafka connect schema"
    );
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::INT4, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", oid::JSONB, -1),
    ]);
    let err = router
        .check_layout(&rel, &TableMeta::unknown())
        .unwrap_err();
    assert!(err.to_string().contains("route.by.field"), "{err}");
}

#[test]
fn defaults_apply_to_get_but_not_to_typed_getters() {
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", oid::JSONB, -1),
    ]);
    let meta_ = TableMeta::new(vec![ColumnMeta {
        name: "aggregateid".into(),
        not_null: false,
        type_name: None,
        default_expr: Some("'none'::character varying".into()),
    }]);
    let mut router = new_router(RouterConfig::default());
    let bound = router.bind(&rel, &meta_).unwrap();
    let r = TupleData {
        columns: vec![text("e"), text("User"), ColumnValue::Null, text("{}")],
    };
    let rec = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .unwrap();
    assert_eq!(s(&rec.key), "none");
}

#[test]
fn a_placed_nan_is_refused_natively_and_null_in_the_debezium_forms() {
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", oid::JSONB, -1),
        ("amount", oid::NUMERIC, (8 << 16) + 2 + 4),
    ]);
    let r = TupleData {
        columns: vec![text("e9"), text("User"), text("k"), text("{}"), text("NaN")],
    };
    let keyed = |base: RouterConfig| RouterConfig {
        key_field: "amount".into(),
        ..base
    };
    let mut native = new_router(keyed(RouterConfig::default()));
    let bound = native.bind(&rel, &TableMeta::unknown()).unwrap();
    let err = native
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("router.numeric_nan") && err.to_string().contains("e9"),
        "{err:?}"
    );
    let mut debezium = new_router(keyed(RouterConfig::debezium()));
    let bound = debezium.bind(&rel, &TableMeta::unknown()).unwrap();
    let rec = debezium
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .unwrap();
    assert_eq!(rec.key, None, "null, as Debezium publishes it");
}

#[test]
fn nan_in_a_required_numeric_fails_the_event_even_unplaced() {
    // numeric(8,2) columns placed nowhere: NOT NULL without a default
    // (Debezium's change event cannot hold its NaN), NOT NULL with one and
    // nullable (both hold it: the default, or null).
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", oid::JSONB, -1),
        ("strict", oid::NUMERIC, (8 << 16) + 2 + 4),
        ("defaulted", oid::NUMERIC, (8 << 16) + 2 + 4),
        ("nullable", oid::NUMERIC, (8 << 16) + 2 + 4),
    ]);
    let col = |name: &str, not_null: bool, default: Option<&str>| ColumnMeta {
        name: name.to_owned(),
        not_null,
        type_name: None,
        default_expr: default.map(str::to_owned),
    };
    let table_meta = TableMeta::new(vec![
        col("strict", true, None),
        col("defaulted", true, Some("1.5")),
        col("nullable", false, None),
    ]);
    let mut router = new_router(RouterConfig::default());
    let bound = router.bind(&rel, &table_meta).unwrap();
    let r = |strict: &str, other: &str| TupleData {
        columns: vec![
            text("e1"),
            text("User"),
            text("k"),
            text("{}"),
            text(strict),
            text(other),
            text(other),
        ],
    };
    assert!(router
        .route(&bound, &r("1.50", "NaN"), &meta())
        .map(Option::unwrap)
        .is_ok());
    let err = router
        .route(&bound, &r("-Infinity", "1.50"), &meta())
        .map(Option::unwrap)
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"strict\"") && text.contains("e1"),
        "names the column and the event: {text}"
    );
    assert!(
        format!("{:?}", err).contains("NOT NULL without a default"),
        "{err:?}"
    );
}

#[test]
fn tracing_headers_follow_the_span_context() {
    let rel = table(&[
        ("id", oid::UUID, -1),
        ("aggregatetype", oid::VARCHAR, -1),
        ("aggregateid", oid::VARCHAR, -1),
        ("payload", oid::JSONB, -1),
        ("tracingspancontext", oid::VARCHAR, -1),
    ]);
    let row = |ctx: Option<&str>| TupleData {
        columns: vec![
            text("e"),
            text("User"),
            text("k"),
            text("{}"),
            ctx.map_or(ColumnValue::Null, text),
        ],
    };
    let mut router = router_with(
        RouterConfig::default(),
        ConvertersConfig::default(),
        DebeziumConfig {
            extended_headers: true,
            ..DebeziumConfig::default()
        },
    );
    let bound = router.bind(&rel, &TableMeta::unknown()).unwrap();
    let rec = router
        .route(&bound, &row(None), &meta())
        .map(Option::unwrap)
        .unwrap();
    assert!(rec.headers.iter().all(|h| &*h.name != "traceparent"));
    let ctx = "#Thu Jan 01 00:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\ntracestate=congo\\=t61rcWkgMzE\n";
    let rec = router
        .route(&bound, &row(Some(ctx)), &meta())
        .map(Option::unwrap)
        .unwrap();
    let names: Vec<&str> = rec.headers.iter().map(|h| &*h.name).collect();
    assert_eq!(names[4..], ["traceparent", "tracestate", "id"]);
    let tp = s(header(&rec, "traceparent"));
    assert!(
        tp.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "{tp}"
    );
    assert!(tp.ends_with("-01") && tp.len() == 55, "{tp}");
    assert_ne!(&tp[36..52], "b7ad6b7169203331", "a new child span");
    assert_eq!(s(header(&rec, "tracestate")), "congo=t61rcWkgMzE");
    // with.context.field.only=false: rows without a context start a trace.
    let mut router = new_router(RouterConfig {
        tracing_with_context_field_only: Some(false),
        ..RouterConfig::default()
    });
    let rec = router
        .route(&bound, &row(None), &meta())
        .map(Option::unwrap)
        .unwrap();
    assert_eq!(&*rec.headers[0].name, "traceparent");
}

#[test]
fn duplicate_envelope_alias_is_refused() {
    let err = Router::new(
        placements("type:envelope:payload"),
        ConvertersConfig::default(),
        DebeziumConfig::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("table.fields.additional.placement"),
        "{err}"
    );
}

// Debezium Server's Kafka sink drops the SMT's partition and timestamp.
#[test]
fn server_mode_drops_partition_and_timestamp() {
    let mut cfg = placements("version:partition");
    cfg.timestamp_field = Some("createdat".to_owned());
    let mut router = router_with(cfg.clone(), ConvertersConfig::default(), it_debezium());
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!(
        (rec.partition, rec.timestamp_ms),
        (Some(1), Some(1_553_460_779_000))
    );
    let mut router = router_with(
        cfg,
        ConvertersConfig::default(),
        DebeziumConfig {
            server_mode: true,
            ..it_debezium()
        },
    );
    let rec = route_it(&mut router, &it_row("User", Some(EMAIL))).unwrap();
    assert_eq!((rec.partition, rec.timestamp_ms), (None, None));
}

// ---- byte-exact against a real Debezium 3.6.1 run (tests/compat/observed/*.jsonl) ----
//
// Table `public.outbox (id uuid not null, aggregatetype varchar(255) not
// null, aggregateid varchar(255) not null, type varchar(255) not null,
// payload jsonb)`, topic.prefix=test, three inserts (observe.sh). The
// `__debezium.context.runId` value is random; its shape is checked instead.

fn observed_table() -> (Arc<RelationInfo>, TableMeta) {
    let rel = Arc::new(RelationInfo {
        id: 16390,
        namespace: "public".to_owned(),
        name: "outbox".to_owned(),
        replica_identity: b'd',
        columns: [
            ("id", oid::UUID, -1),
            ("aggregatetype", oid::VARCHAR, 259),
            ("aggregateid", oid::VARCHAR, 259),
            ("type", oid::VARCHAR, 259),
            ("payload", oid::JSONB, -1),
        ]
        .iter()
        .map(|(name, type_oid, type_modifier)| RelationColumnInfo {
            name: (*name).to_owned(),
            type_oid: *type_oid,
            type_modifier: *type_modifier,
            is_key: *name == "id",
        })
        .collect(),
    });
    let col = |name: &str, not_null: bool| ColumnMeta {
        name: name.to_owned(),
        not_null,
        type_name: None,
        default_expr: None,
    };
    let meta = TableMeta::new(vec![
        col("id", true),
        col("aggregatetype", true),
        col("aggregateid", true),
        col("type", true),
        col("payload", false),
    ]);
    (rel, meta)
}

fn observed_rows(aggtype: &str) -> Vec<TupleData> {
    let t = |s: &str| text(s);
    vec![
        TupleData {
            columns: vec![
                t("59a42efd-b015-44a9-9dde-cb36d9002425"),
                t(aggtype),
                t("10711fa5"),
                t("UserCreated"),
                t("{\"email\": \"gh@mefi.in\"}"),
            ],
        },
        TupleData {
            columns: vec![
                t("0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"),
                t(aggtype),
                t("k2"),
                t("UserUpdated"),
                t(
                    r#"{"a": "dup", "name": "Zoë \"q\" \\ tab\t", "zeta": 1, "nested": {"b": {}, "aa": []}}"#,
                ),
            ],
        },
        TupleData {
            columns: vec![
                t("7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"),
                t(aggtype),
                t("10711fa5"),
                t("UserDeleted"),
                ColumnValue::Null,
            ],
        },
    ]
}

/// One observed record: topic, key, value, non-context headers (name, value).
type Observed = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
);

/// `cfg` is what observe.sh's EventRouter properties translate to: the
/// Debezium forms' defaults ([`RouterConfig::debezium`]) and the keys set.
fn check_observed(cfg: RouterConfig, conv: ConvertersConfig, aggtype: &str, expected: &[Observed]) {
    let debezium = DebeziumConfig {
        topic_prefix: "test".to_owned(),
        extended_headers: true,
        ..DebeziumConfig::default()
    };
    let mut router = Router::new(cfg, conv, debezium).expect("valid");
    let (rel, meta_) = observed_table();
    let bound = router.bind(&rel, &meta_).expect("binds");
    for (row, (topic, key, value, headers)) in observed_rows(aggtype).iter().zip(expected) {
        let rec = router
            .route(&bound, row, &meta())
            .map(Option::unwrap)
            .expect("routes");
        let text = |b: &Option<Bytes>| {
            b.as_ref()
                .map(|b| String::from_utf8(b.to_vec()).expect("utf-8"))
        };
        assert_eq!(&*rec.topic, *topic);
        assert_eq!(text(&rec.key).as_deref(), *key);
        assert_eq!(text(&rec.value).as_deref(), *value);
        assert_eq!(rec.headers[3].name.as_ref(), HEADER_RUN_ID);
        let run_id = text(&rec.headers[3].value).expect("run id");
        let uuid =
            run_id.trim_start_matches(|c: char| !c.is_ascii_hexdigit() || c.is_ascii_uppercase());
        let uuid = &uuid[uuid.find('-').map_or(0, |d| d.saturating_sub(8))..];
        assert_eq!(&uuid[14..15], "7", "runId is a version 7 uuid: {run_id}");
        let got: Vec<(&str, Option<String>)> = rec
            .headers
            .iter()
            .filter(|h| &*h.name != HEADER_RUN_ID)
            .map(|h| (&*h.name, text(&h.value)))
            .collect();
        let want: Vec<(&str, Option<String>)> = headers
            .iter()
            .map(|(n, v)| (*n, Some((*v).to_owned())))
            .collect();
        assert_eq!(got, want);
        assert_eq!(rec.partition, None);
    }
}

#[test]
fn observed_envelope_noschemas() {
    check_observed(
        RouterConfig {
            additional_placement: Some("type:envelope:eventType".to_owned()),
            ..RouterConfig::debezium()
        },
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: false,
            value: ConverterKind::Json,
            value_schemas_enable: false,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_envelope_noschemas",
        &[
            (
                "outbox.event.User_1796023720_envelope_noschemas",
                Some(r#""10711fa5""#),
                Some(r#"{"payload":"{\"email\": \"gh@mefi.in\"}","eventType":"UserCreated"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_envelope_noschemas",
                Some(r#""k2""#),
                Some(
                    r#"{"payload":"{\"a\": \"dup\", \"name\": \"Zoë \\\"q\\\" \\\\ tab\\t\", \"zeta\": 1, \"nested\": {\"b\": {}, \"aa\": []}}","eventType":"UserUpdated"}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_envelope_noschemas",
                Some(r#""10711fa5""#),
                Some(r#"{"payload":null,"eventType":"UserDeleted"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_envelope_schemas() {
    check_observed(
        RouterConfig {
            additional_placement: Some("type:envelope:eventType".to_owned()),
            ..RouterConfig::debezium()
        },
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: true,
            value: ConverterKind::Json,
            value_schemas_enable: true,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_envelope_schemas",
        &[
            (
                "outbox.event.User_1796023720_envelope_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#),
                Some(
                    r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"test.public.outbox.User_1796023720_envelope_schemas.Value"},"payload":{"payload":"{\"email\": \"gh@mefi.in\"}","eventType":"UserCreated"}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_envelope_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"k2"}"#),
                Some(
                    r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"test.public.outbox.User_1796023720_envelope_schemas.Value"},"payload":{"payload":"{\"a\": \"dup\", \"name\": \"Zoë \\\"q\\\" \\\\ tab\\t\", \"zeta\": 1, \"nested\": {\"b\": {}, \"aa\": []}}","eventType":"UserUpdated"}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_envelope_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#),
                Some(
                    r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"}],"optional":false,"name":"test.public.outbox.User_1796023720_envelope_schemas.Value"},"payload":{"payload":null,"eventType":"UserDeleted"}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_envelope_tombstone() {
    check_observed(
        RouterConfig {
            additional_placement: Some("type:envelope:eventType".to_owned()),
            route_tombstone_on_empty_payload: true,
            ..RouterConfig::debezium()
        },
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: false,
            value: ConverterKind::Json,
            value_schemas_enable: false,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_envelope_tombstone",
        &[
            (
                "outbox.event.User_1796023720_envelope_tombstone",
                Some(r#""10711fa5""#),
                Some(r#"{"payload":"{\"email\": \"gh@mefi.in\"}","eventType":"UserCreated"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_envelope_tombstone",
                Some(r#""k2""#),
                Some(
                    r#"{"payload":"{\"a\": \"dup\", \"name\": \"Zoë \\\"q\\\" \\\\ tab\\t\", \"zeta\": 1, \"nested\": {\"b\": {}, \"aa\": []}}","eventType":"UserUpdated"}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_envelope_tombstone",
                Some(r#""10711fa5""#),
                None,
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_expand_noschemas() {
    check_observed(
        RouterConfig {
            expand_json_payload: true,
            ..RouterConfig::debezium()
        },
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: false,
            value: ConverterKind::Json,
            value_schemas_enable: false,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_expand_noschemas",
        &[
            (
                "outbox.event.User_1796023720_expand_noschemas",
                Some(r#""10711fa5""#),
                Some(r#"{"email":"gh@mefi.in"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_expand_noschemas",
                Some(r#""k2""#),
                Some(r#"{"a":"dup","name":"Zoë \"q\" \\ tab\t","zeta":1,"nested":{"b":{}}}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_expand_noschemas",
                Some(r#""10711fa5""#),
                Some(r#"null"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_expand_schemas() {
    check_observed(
        RouterConfig {
            expand_json_payload: true,
            ..RouterConfig::debezium()
        },
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: true,
            value: ConverterKind::Json,
            value_schemas_enable: true,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_expand_schemas",
        &[
            (
                "outbox.event.User_1796023720_expand_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#),
                Some(
                    r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"field":"email"}],"optional":true,"name":"payload"},"payload":{"email":"gh@mefi.in"}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_expand_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"k2"}"#),
                Some(
                    r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"field":"a"},{"type":"string","optional":true,"field":"name"},{"type":"int32","optional":true,"field":"zeta"},{"type":"struct","fields":[{"type":"struct","fields":[],"optional":true,"name":"payload.nested.b","field":"b"}],"optional":true,"name":"payload.nested","field":"nested"}],"optional":true,"name":"payload"},"payload":{"a":"dup","name":"Zoë \"q\" \\ tab\t","zeta":1,"nested":{"b":{}}}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_expand_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#),
                Some(
                    r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_header_json_noschemas() {
    check_observed(
        RouterConfig::debezium(),
        ConvertersConfig {
            key: ConverterKind::String,
            key_schemas_enable: true,
            value: ConverterKind::String,
            value_schemas_enable: true,
            header: HeaderConverterKind::Json,
            header_schemas_enable: false,
        },
        "User_1796023720_header_json_noschemas",
        &[
            (
                "outbox.event.User_1796023720_header_json_noschemas",
                Some(r#"10711fa5"#),
                Some(r#"{"email": "gh@mefi.in"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#""test""#),
                    ("__debezium.context.taskId", r#""0""#),
                    ("__debezium.context.connectorName", r#""postgresql""#),
                    ("id", r#""59a42efd-b015-44a9-9dde-cb36d9002425""#),
                ],
            ),
            (
                "outbox.event.User_1796023720_header_json_noschemas",
                Some(r#"k2"#),
                Some(
                    r#"{"a": "dup", "name": "Zoë \"q\" \\ tab\t", "zeta": 1, "nested": {"b": {}, "aa": []}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#""test""#),
                    ("__debezium.context.taskId", r#""0""#),
                    ("__debezium.context.connectorName", r#""postgresql""#),
                    ("id", r#""0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01""#),
                ],
            ),
            (
                "outbox.event.User_1796023720_header_json_noschemas",
                Some(r#"10711fa5"#),
                None,
                &[
                    ("__debezium.context.connectorLogicalName", r#""test""#),
                    ("__debezium.context.taskId", r#""0""#),
                    ("__debezium.context.connectorName", r#""postgresql""#),
                    ("id", r#""7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10""#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_header_json() {
    check_observed(
        RouterConfig::debezium(),
        ConvertersConfig {
            key: ConverterKind::String,
            key_schemas_enable: true,
            value: ConverterKind::String,
            value_schemas_enable: true,
            header: HeaderConverterKind::Json,
            header_schemas_enable: true,
        },
        "User_1796023720_header_json",
        &[
            (
                "outbox.event.User_1796023720_header_json",
                Some(r#"10711fa5"#),
                Some(r#"{"email": "gh@mefi.in"}"#),
                &[
                    (
                        "__debezium.context.connectorLogicalName",
                        r#"{"schema":{"type":"string","optional":false},"payload":"test"}"#,
                    ),
                    (
                        "__debezium.context.taskId",
                        r#"{"schema":{"type":"string","optional":false},"payload":"0"}"#,
                    ),
                    (
                        "__debezium.context.connectorName",
                        r#"{"schema":{"type":"string","optional":false},"payload":"postgresql"}"#,
                    ),
                    (
                        "id",
                        r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"59a42efd-b015-44a9-9dde-cb36d9002425"}"#,
                    ),
                ],
            ),
            (
                "outbox.event.User_1796023720_header_json",
                Some(r#"k2"#),
                Some(
                    r#"{"a": "dup", "name": "Zoë \"q\" \\ tab\t", "zeta": 1, "nested": {"b": {}, "aa": []}}"#,
                ),
                &[
                    (
                        "__debezium.context.connectorLogicalName",
                        r#"{"schema":{"type":"string","optional":false},"payload":"test"}"#,
                    ),
                    (
                        "__debezium.context.taskId",
                        r#"{"schema":{"type":"string","optional":false},"payload":"0"}"#,
                    ),
                    (
                        "__debezium.context.connectorName",
                        r#"{"schema":{"type":"string","optional":false},"payload":"postgresql"}"#,
                    ),
                    (
                        "id",
                        r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"}"#,
                    ),
                ],
            ),
            (
                "outbox.event.User_1796023720_header_json",
                Some(r#"10711fa5"#),
                None,
                &[
                    (
                        "__debezium.context.connectorLogicalName",
                        r#"{"schema":{"type":"string","optional":false},"payload":"test"}"#,
                    ),
                    (
                        "__debezium.context.taskId",
                        r#"{"schema":{"type":"string","optional":false},"payload":"0"}"#,
                    ),
                    (
                        "__debezium.context.connectorName",
                        r#"{"schema":{"type":"string","optional":false},"payload":"postgresql"}"#,
                    ),
                    (
                        "id",
                        r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"}"#,
                    ),
                ],
            ),
        ],
    );
}

#[test]
fn observed_header_placement() {
    check_observed(
        RouterConfig {
            additional_placement: Some("type:header:eventType".to_owned()),
            ..RouterConfig::debezium()
        },
        ConvertersConfig {
            key: ConverterKind::String,
            key_schemas_enable: true,
            value: ConverterKind::String,
            value_schemas_enable: true,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_header_placement",
        &[
            (
                "outbox.event.User_1796023720_header_placement",
                Some(r#"10711fa5"#),
                Some(r#"{"email": "gh@mefi.in"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                    ("eventType", r#"UserCreated"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_header_placement",
                Some(r#"k2"#),
                Some(
                    r#"{"a": "dup", "name": "Zoë \"q\" \\ tab\t", "zeta": 1, "nested": {"b": {}, "aa": []}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                    ("eventType", r#"UserUpdated"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_header_placement",
                Some(r#"10711fa5"#),
                None,
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                    ("eventType", r#"UserDeleted"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_json_noschemas() {
    check_observed(
        RouterConfig::debezium(),
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: false,
            value: ConverterKind::Json,
            value_schemas_enable: false,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_json_noschemas",
        &[
            (
                "outbox.event.User_1796023720_json_noschemas",
                Some(r#""10711fa5""#),
                Some(r#""{\"email\": \"gh@mefi.in\"}""#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_json_noschemas",
                Some(r#""k2""#),
                Some(
                    r#""{\"a\": \"dup\", \"name\": \"Zoë \\\"q\\\" \\\\ tab\\t\", \"zeta\": 1, \"nested\": {\"b\": {}, \"aa\": []}}""#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_json_noschemas",
                Some(r#""10711fa5""#),
                Some(r#"null"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_json_schemas() {
    check_observed(
        RouterConfig::debezium(),
        ConvertersConfig {
            key: ConverterKind::Json,
            key_schemas_enable: true,
            value: ConverterKind::Json,
            value_schemas_enable: true,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_json_schemas",
        &[
            (
                "outbox.event.User_1796023720_json_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#),
                Some(
                    r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"email\": \"gh@mefi.in\"}"}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_json_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"k2"}"#),
                Some(
                    r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"a\": \"dup\", \"name\": \"Zoë \\\"q\\\" \\\\ tab\\t\", \"zeta\": 1, \"nested\": {\"b\": {}, \"aa\": []}}"}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_json_schemas",
                Some(r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#),
                Some(
                    r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn observed_string() {
    check_observed(
        RouterConfig::debezium(),
        ConvertersConfig {
            key: ConverterKind::String,
            key_schemas_enable: true,
            value: ConverterKind::String,
            value_schemas_enable: true,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        },
        "User_1796023720_string",
        &[
            (
                "outbox.event.User_1796023720_string",
                Some(r#"10711fa5"#),
                Some(r#"{"email": "gh@mefi.in"}"#),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"59a42efd-b015-44a9-9dde-cb36d9002425"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_string",
                Some(r#"k2"#),
                Some(
                    r#"{"a": "dup", "name": "Zoë \"q\" \\ tab\t", "zeta": 1, "nested": {"b": {}, "aa": []}}"#,
                ),
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01"#),
                ],
            ),
            (
                "outbox.event.User_1796023720_string",
                Some(r#"10711fa5"#),
                None,
                &[
                    ("__debezium.context.connectorLogicalName", r#"test"#),
                    ("__debezium.context.taskId", r#"0"#),
                    ("__debezium.context.connectorName", r#"postgresql"#),
                    ("id", r#"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10"#),
                ],
            ),
        ],
    );
}

#[test]
fn strict_null_key_and_id_and_illegal_topics_are_named() {
    let mut router = new_router(RouterConfig::default());
    let rel = relation(UUID_OID);
    let bound = router
        .bind(&rel, &TableMeta::unknown())
        .expect("outbox columns present");
    let r = row(text("e1"), text("User"), ColumnValue::Null, text("{}"));
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("null key");
    assert_eq!(err.kind(), "null_key");
    let msg = err.to_string();
    assert!(
        msg.contains("\"aggregateid\"") && msg.contains("e1") && msg.contains("16/B374D848"),
        "{msg}"
    );
    let r = row(ColumnValue::Null, text("User"), text("k"), text("{}"));
    let err = router
        .route(&bound, &r, &meta())
        .map(Option::unwrap)
        .expect_err("null id");
    assert_eq!(err.kind(), "null_id");
    assert!(err.to_string().contains("\"id\""), "{err}");
    for bad in ["a b", "ü", &"x".repeat(250)] {
        let r = row(text("e2"), text(bad), text("k"), text("{}"));
        let err = router
            .route(&bound, &r, &meta())
            .map(Option::unwrap)
            .expect_err("illegal topic");
        assert_eq!(err.kind(), "invalid_topic", "{bad}");
        assert_eq!(err.topic(), Some(format!("outbox.event.{bad}").as_str()));
        assert!(err.to_string().contains("e2"), "{err}");
    }
    // The next good event still routes (an illegal topic is never cached).
    let r = row(text("e3"), text("User"), text("k"), text("{}"));
    assert_eq!(
        &*router
            .route(&bound, &r, &meta())
            .map(Option::unwrap)
            .expect("routes")
            .topic,
        "outbox.event.User"
    );
}

#[test]
fn topic_name_rules() {
    assert!(check_topic_name("outbox.event.User-1_x").is_ok());
    assert!(check_topic_name(&"a".repeat(249)).is_ok());
    for bad in ["", ".", "..", "a/b", "a b", "é", &"a".repeat(250)] {
        assert!(check_topic_name(bad).is_err(), "{bad:?}");
    }
}

/// Expansion that fails after the schema was inferred: Debezium sends the
/// text under the inferred schema, which only StringConverter (without an
/// envelope) prints; the empty array has no schema and goes out schemaless.
#[test]
fn json_expansion_failing_after_the_schema() {
    let expand = |p: Option<&str>| RouterConfig {
        expand_json_payload: true,
        additional_placement: p.map(str::to_owned),
        ..RouterConfig::default()
    };
    let json = |schemas| converters(ConverterKind::String, ConverterKind::Json, schemas);
    for schemas in [false, true] {
        let mut router = router_with(expand(None), json(schemas), it_debezium());
        for payload in ["[1, 2]", r#"[{"a": 1}]"#, r#"{"a": [[1], ["x"]]}"#] {
            let err = route_it(&mut router, &it_row("User", Some(payload))).unwrap_err();
            assert_eq!(err.kind(), "json_expansion", "{payload}");
            assert_eq!(err.column(), Some("payload"));
        }
        let rec = route_it(&mut router, &it_row("User", Some("[]"))).unwrap();
        let want = if schemas {
            r#"{"schema":null,"payload":"[]"}"#
        } else {
            r#""[]""#
        };
        assert_eq!(s(&rec.value), want);
        // A mixed array has no schema at all: the text, with its schema.
        let rec = route_it(&mut router, &it_row("User", Some("[1, \"x\"]"))).unwrap();
        assert!(s(&rec.value).contains(r#"[1, \"x\"]"#), "{}", s(&rec.value));
    }
    let mut router = router_with(expand(None), ConvertersConfig::default(), it_debezium());
    let rec = route_it(&mut router, &it_row("User", Some("[1, 2]"))).unwrap();
    assert_eq!(s(&rec.value), "[1, 2]");
    let mut router = router_with(
        expand(Some("type:envelope:eventType")),
        ConvertersConfig::default(),
        it_debezium(),
    );
    let err = route_it(&mut router, &it_row("User", Some("[1, 2]"))).unwrap_err();
    assert_eq!(err.kind(), "json_expansion");
}

// ---- several outbox tables: one router, each table's own columns ----

/// `it_table` under another name (a second outbox table of the same shape).
fn renamed(name: &str) -> Arc<RelationInfo> {
    let mut rel = RelationInfo::clone(&it_table());
    rel.id += 1;
    rel.name = name.to_owned();
    Arc::new(rel)
}

// Debezium routes every captured table through one EventRouter, whose
// envelope schema cache is keyed by the payload schema alone: the first
// table (and route value) seen names the envelope for all of them.
#[test]
fn tables_with_router_columns_share_the_envelope_schema_cache() {
    let mut router = router_with(
        placements("type:envelope:eventType"),
        converters(ConverterKind::String, ConverterKind::Json, true),
        it_debezium(),
    );
    let a = router.bind(&it_table(), &it_meta()).unwrap();
    let b = router.bind(&renamed("second"), &it_meta()).unwrap();
    let first = router
        .route(&a, &it_row("User", Some(EMAIL)), &meta())
        .map(Option::unwrap)
        .unwrap();
    let second = router
        .route(&b, &it_row("Order", Some(EMAIL)), &meta())
        .map(Option::unwrap)
        .unwrap();
    for rec in [&first, &second] {
        assert!(
            s(&rec.value).contains(r#""name":"test_server.outboxsmtit.outbox.User.Value""#),
            "{}",
            s(&rec.value)
        );
    }
    assert_eq!(b.table_name(), "outboxsmtit.second");
}

// A table with its own columns: bound and routed with them, its envelope
// schemas cached apart from the other tables'.
#[test]
fn a_table_with_its_own_columns_is_bound_with_them() {
    let mut router = router_with(
        placements("type:envelope:eventType"),
        converters(ConverterKind::String, ConverterKind::Json, false),
        it_debezium(),
    );
    let billing = table(&[
        ("event_id", oid::VARCHAR, -1),
        ("kind", oid::VARCHAR, -1),
        ("account", oid::VARCHAR, -1),
        ("body", oid::TEXT, -1),
        ("created", oid::TIMESTAMP, -1),
    ]);
    let own = router
        .mapping(&ColumnOverrides {
            id_field: Some("event_id".into()),
            key_field: Some("account".into()),
            payload_field: Some("body".into()),
            route_by_field: Some("kind".into()),
            timestamp_field: Some("created".into()),
            additional_placement: Some("kind:header:k".into()),
            ..ColumnOverrides::default()
        })
        .unwrap();
    assert!(!own.is_router_default());
    // [router]'s columns do not fit this table; its own do.
    assert!(matches!(
        router.check_layout(&billing, &TableMeta::unknown()),
        Err(RouteError::MissingColumn { .. })
    ));
    router
        .check_layout_with(&billing, &TableMeta::unknown(), &own)
        .unwrap();
    let bound = router
        .bind_with(&billing, &TableMeta::unknown(), &own)
        .unwrap();
    assert!(bound.problem().is_none());
    let row = TupleData {
        columns: vec![
            text("e-1"),
            text("Invoice"),
            text("acct-7"),
            text("hello"),
            text("2019-03-24 20:52:59"),
        ],
    };
    let rec = router
        .route(&bound, &row, &meta())
        .map(Option::unwrap)
        .unwrap();
    assert_eq!(&*rec.topic, "outbox.event.Invoice");
    assert_eq!(s(&rec.key), "acct-7");
    // No envelope placement for this table: the payload as is.
    assert_eq!(s(&rec.value), r#""hello""#);
    assert_eq!(s(header(&rec, "id")), "e-1");
    assert_eq!(s(header(&rec, "k")), "Invoice");
    assert_eq!(rec.timestamp_ms, Some(1_553_460_779_000));
    assert_eq!(
        router.intended_topic(&bound, &row).as_deref(),
        Some("outbox.event.Invoice")
    );
    // The [router] tables keep their envelope.
    let it = router.bind(&it_table(), &it_meta()).unwrap();
    let rec = router
        .route(&it, &it_row("User", Some(EMAIL)), &meta())
        .map(Option::unwrap)
        .unwrap();
    assert!(
        s(&rec.value).starts_with(r#"{"payload":"#),
        "{}",
        s(&rec.value)
    );
}

#[test]
fn a_missing_column_of_a_table_mapping_names_table_and_column() {
    let router = new_router(RouterConfig::default());
    let own = router
        .mapping(&ColumnOverrides {
            key_field: Some("account_id".into()),
            ..ColumnOverrides::default()
        })
        .unwrap();
    let err = router
        .check_layout_with(&relation(UUID_OID), &TableMeta::unknown(), &own)
        .unwrap_err();
    assert_eq!(
        err,
        RouteError::MissingColumn {
            table: "public.outbox".into(),
            column: "account_id".into(),
            key: KEY_KEY_FIELD,
        }
    );
    // An envelope field named twice is refused for a table as for [router].
    assert!(router
        .mapping(&ColumnOverrides {
            additional_placement: Some("a:envelope:x,b:envelope:x".into()),
            ..ColumnOverrides::default()
        })
        .is_err());
}

/// A chain whose only transform never applies (its predicate is false for
/// every record): the router keeps Connect data and converts after the
/// chain, and must give what it gives without a chain, byte for byte.
fn inert_chain() -> crate::connect::transforms::Chain {
    use crate::connect::transforms::config::{build, OptionValue, PredicateSpec, TransformSpec};
    let transforms = [TransformSpec {
        name: "never".into(),
        class: "HoistField$Value".into(),
        predicate: Some("absent".into()),
        negate: None,
        options: [("field".to_owned(), OptionValue::Text("x".into()))].into(),
    }];
    let predicates = [PredicateSpec {
        name: "absent".into(),
        class: "HasHeaderKey".into(),
        options: [(
            "name".to_owned(),
            OptionValue::Text("no-such-header".into()),
        )]
        .into(),
    }];
    build(&transforms, &predicates).expect("valid chain").0
}

#[test]
fn an_inert_chain_changes_no_byte() {
    let placements = [
        None,
        Some("type:header:eventType,aggregateid:envelope:agg"),
        Some("type:header:eventType"),
    ];
    let kinds = [
        (ConverterKind::String, false),
        (ConverterKind::Json, true),
        (ConverterKind::Json, false),
    ];
    let rows = [
        user_row(),
        row(text("1"), text("User"), text("k"), ColumnValue::Null),
        row(text("2"), text("User"), ColumnValue::Null, text("  ")),
        row(
            text("3"),
            text("Order"),
            text("k3"),
            text(r#"{"a": [1, 2.5], "b": {"c": null}}"#),
        ),
    ];
    for expand in [false, true] {
        for tombstone in [false, true] {
            for p in placements {
                for (kind, schemas) in kinds {
                    let cfg = RouterConfig {
                        expand_json_payload: expand,
                        route_tombstone_on_empty_payload: tombstone,
                        additional_placement: p.map(str::to_owned),
                        ..RouterConfig::default()
                    };
                    let conv = converters(kind, kind, schemas);
                    let debezium = DebeziumConfig::default();
                    let mut plain = Router::new(cfg.clone(), conv, debezium.clone()).unwrap();
                    let mut chained = Router::new(cfg, conv, debezium)
                        .unwrap()
                        .with_chain(inert_chain());
                    let rel = relation(UUID_OID);
                    let b1 = plain.bind(&rel, &TableMeta::unknown()).unwrap();
                    let b2 = chained.bind(&rel, &TableMeta::unknown()).unwrap();
                    for r in &rows {
                        let a = plain.route(&b1, r, &meta());
                        let b = chained.route(&b2, r, &meta());
                        let what = format!(
                            "expand {expand}, tombstone {tombstone}, {p:?}, {kind:?}/{schemas}"
                        );
                        match (a, b) {
                            (Ok(Some(a)), Ok(Some(mut b))) => {
                                // The chain's record carries Debezium's
                                // processing time where no column gives one.
                                assert!(a.timestamp_ms.is_none(), "{what}");
                                assert!(b.timestamp_ms.is_some(), "{what}");
                                b.timestamp_ms = None;
                                // Extended headers carry a run id per router.
                                let strip = |h: &mut Vec<RecordHeader>| {
                                    h.retain(|h| &*h.name != HEADER_RUN_ID);
                                };
                                let mut a = a;
                                strip(&mut a.headers);
                                strip(&mut b.headers);
                                assert_eq!(a, b, "{what}");
                            }
                            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "{what}"),
                            (a, b) => panic!("{what}: {a:?} against {b:?}"),
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_chain_reshapes_the_record_and_its_failure_names_the_transform() {
    use crate::connect::transforms::config::{build, OptionValue, TransformSpec};
    let spec = |name: &str, class: &str, opts: &[(&str, &str)]| TransformSpec {
        name: name.into(),
        class: class.into(),
        predicate: None,
        negate: None,
        options: opts
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OptionValue::Text((*v).to_owned())))
            .collect(),
    };
    let chain = build(
        &[
            spec("hoist", "HoistField$Value", &[("field", "event")]),
            spec(
                "insert",
                "org.apache.kafka.connect.transforms.InsertField$Value",
                &[
                    ("static.field", "source"),
                    ("static.value", "w"),
                    ("topic.field", "t"),
                ],
            ),
            spec("key", "HoistField$Key", &[("field", "agg")]),
        ],
        &[],
    )
    .expect("valid")
    .0;
    let conv = converters(ConverterKind::Json, ConverterKind::Json, false);
    let mut r = Router::new(RouterConfig::default(), conv, DebeziumConfig::default())
        .unwrap()
        .with_chain(chain);
    let rel = relation(UUID_OID);
    let bound = r.bind(&rel, &TableMeta::unknown()).unwrap();
    let rec = r.route(&bound, &user_row(), &meta()).unwrap().unwrap();
    assert_eq!(rec.key.as_deref(), Some(&br#"{"agg":"10711fa5"}"#[..]));
    assert_eq!(
        std::str::from_utf8(rec.value.as_deref().unwrap()).unwrap(),
        r#"{"event":"{\"email\": \"gh@mefi.in\"}","t":"outbox.event.User","source":"w"}"#
    );
    let failing = build(
        &[spec("pick", "ExtractField$Value", &[("field", "nope")])],
        &[],
    )
    .unwrap()
    .0;
    let mut r = Router::new(RouterConfig::default(), conv, DebeziumConfig::default())
        .unwrap()
        .with_chain(failing);
    let bound = r.bind(&rel, &TableMeta::unknown()).unwrap();
    let err = r.route(&bound, &user_row(), &meta()).unwrap_err();
    assert_eq!(err.kind(), "transform");
    let text = err.to_string();
    assert!(text.contains("pick") && text.contains("59a42efd"), "{text}");
}

#[test]
fn cloudevents_read_the_copied_envelope_headers_of_an_outbox_row() {
    use crate::connect::cloudevents::{
        CloudEventsConfig, CloudEventsContext, CloudEventsConverter,
    };
    use crate::connect::config::HeaderConverterKind;
    let conv = ConvertersConfig {
        key: ConverterKind::Json,
        value: ConverterKind::CloudEvents,
        header: HeaderConverterKind::Json,
        ..ConvertersConfig::default()
    };
    let cfg = RouterConfig {
        expand_json_payload: true,
        additional_placement: Some("type:header".to_owned()),
        ..RouterConfig::default()
    };
    let options = [("metadata.source".to_owned(), "header".to_owned())].into();
    let ce = CloudEventsConverter::new(
        CloudEventsConfig::from_options(&options).unwrap(),
        CloudEventsContext {
            header_converter: HeaderConverterKind::Json,
            header_schemas_enable: true,
        },
    );
    let debezium = DebeziumConfig {
        topic_prefix: "shop".into(),
        ..DebeziumConfig::default()
    };
    let fields = vec![
        (EnvelopeField::Source, "source".to_owned()),
        (EnvelopeField::Op, "op".to_owned()),
    ];
    let mut r = Router::new(cfg, conv, debezium)
        .unwrap()
        .with_envelope_headers(fields, "orders")
        .with_cloudevents(ce);
    let rel = relation(UUID_OID);
    let bound = r.bind(&rel, &TableMeta::unknown()).unwrap();
    let rec = r.route(&bound, &user_row(), &meta()).unwrap().unwrap();
    let value = String::from_utf8(rec.value.unwrap().to_vec()).unwrap();
    assert!(
        value.starts_with(r#"{"id":"59a42efd-b015-44a9-9dde-cb36d9002425","source":"/debezium/postgresql/shop","specversion":"1.0","type":"UserCreated","#),
        "{value}"
    );
    assert!(value.contains(r#""iodebeziumtable":"outbox""#), "{value}");
    assert!(value.contains(r#""data":{"schema":"#), "{value}");
    let names: Vec<&str> = rec.headers.iter().map(|h| &*h.name).collect();
    assert_eq!(names, ["source", "op", "id", "type"]);
}
