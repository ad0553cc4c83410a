//! Expected bytes are derived from Debezium 3.6.1's
//! `CloudEventsConverter.fromConnectData`, `PostgresCloudEventsMaker`,
//! `RecordAndMetadata{Base,Header}Impl` and the assertions of
//! `CloudEventsConverterTest` / `AbstractCloudEventsConverterTest` (the
//! PostgreSQL `CloudEventsConverterIT` outbox cases), with the JSON as
//! Kafka 4.1.1's JsonConverter writes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;

fn field(name: &str, schema: Schema) -> Field {
    Field {
        name: Arc::from(name),
        schema: Arc::new(schema),
    }
}

fn req(kind: Type) -> Schema {
    Schema::new(kind)
}

fn opt(kind: Type) -> Schema {
    Schema::optional(kind)
}

/// `io.debezium.connector.postgresql.Source` of Debezium 3.6.1.
fn source_schema() -> Schema {
    let mut snapshot = opt(Type::String)
        .named("io.debezium.data.Enum", Some(1))
        .with_parameter(
            "allowed",
            "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental",
        );
    snapshot.default = Some(Value::string("false"));
    let mut s = Schema::structure(
        Some("io.debezium.connector.postgresql.Source"),
        vec![
            field("version", req(Type::String)),
            field("connector", req(Type::String)),
            field("name", req(Type::String)),
            field("ts_ms", req(Type::Int64)),
            field("snapshot", snapshot),
            field("db", req(Type::String)),
            field("sequence", opt(Type::String)),
            field("ts_us", opt(Type::Int64)),
            field("ts_ns", opt(Type::Int64)),
            field("schema", req(Type::String)),
            field("table", req(Type::String)),
            field("txId", opt(Type::Int64)),
            field("lsn", opt(Type::Int64)),
            field("xmin", opt(Type::Int64)),
            field("origin", opt(Type::String)),
            field("origin_lsn", opt(Type::Int64)),
        ],
    );
    s.version = Some(1);
    s
}

fn source_value(connector: &str) -> Value {
    Value::Struct(vec![
        Value::string("3.6.1.Final"),
        Value::string(connector),
        Value::string("test_server"),
        Value::Int64(1_578_923_739_738),
        Value::Null,
        Value::string("postgres"),
        Value::string("[null,\"24023928\"]"),
        Value::Int64(1_578_923_739_738_123),
        Value::Int64(1_578_923_739_738_123_000),
        Value::string("s1"),
        Value::string("a"),
        Value::Int64(565),
        Value::Int64(24_023_928),
        Value::Null,
        Value::Null,
        Value::Null,
    ])
}

fn tx_schema() -> Schema {
    let mut s = Schema::structure(
        Some("event.block"),
        vec![
            field("id", req(Type::String)),
            field("total_order", req(Type::Int64)),
            field("data_collection_order", req(Type::Int64)),
        ],
    );
    s.optional = true;
    s.version = Some(1);
    s
}

fn tx_value() -> Value {
    Value::Struct(vec![
        Value::string("565:24023928"),
        Value::Int64(1),
        Value::Int64(1),
    ])
}

fn row_schema() -> Schema {
    let mut s = Schema::structure(
        Some("test_server.s1.a.Value"),
        vec![field("pk", req(Type::Int32)), field("aa", opt(Type::Int32))],
    );
    s.optional = true;
    s
}

fn envelope_schema() -> Schema {
    let mut s = Schema::structure(
        Some("test_server.s1.a.Envelope"),
        vec![
            field("before", row_schema()),
            field("after", row_schema()),
            field("source", source_schema()),
            field("transaction", tx_schema()),
            field("op", req(Type::String)),
            field("ts_ms", opt(Type::Int64)),
            field("ts_us", opt(Type::Int64)),
            field("ts_ns", opt(Type::Int64)),
        ],
    );
    s.version = Some(2);
    s
}

fn envelope(connector: &str, tx: Value) -> Value {
    Value::Struct(vec![
        Value::Null,
        Value::Struct(vec![Value::Int32(1), Value::Int32(1)]),
        source_value(connector),
        tx,
        Value::string("c"),
        Value::Int64(1_578_923_740_000),
        Value::Null,
        Value::Null,
    ])
}

/// The EventRouter's value with `table.expand.json.payload=true`.
fn outbox_schema() -> Schema {
    Schema::structure(
        Some("test_server.outboxsmtit.outbox.Value"),
        vec![
            field("someField1", opt(Type::String)),
            field("someField2", opt(Type::Int32)),
        ],
    )
}

fn outbox_value() -> Value {
    Value::Struct(vec![Value::string("some value 1"), Value::Int32(7005)])
}

fn header(key: &str, schema: Schema, value: Value) -> ConnectHeader {
    ConnectHeader {
        key: Arc::from(key),
        schema: Some(Arc::new(schema)),
        value,
    }
}

/// The headers `HeaderFrom` (source, op, transaction) and the EventRouter
/// (`id`, and `type` from `table.fields.additional.placement`) add.
fn outbox_headers() -> Vec<ConnectHeader> {
    vec![
        header("source", source_schema(), source_value("postgresql")),
        header("op", req(Type::String), Value::string("c")),
        header("transaction", tx_schema(), Value::Null),
        header(
            "id",
            req(Type::String).named("io.debezium.data.Uuid", Some(1)),
            Value::string("59a42efd-b015-44a9-9dde-cb36d9002425"),
        ),
        header("type", req(Type::String), Value::string("UserCreated")),
    ]
}

fn json_headers() -> CloudEventsContext {
    CloudEventsContext {
        header_converter: HeaderConverterKind::Json,
        header_schemas_enable: true,
    }
}

fn config(pairs: &[(&str, &str)]) -> Result<CloudEventsConfig, TransformConfigError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    CloudEventsConfig::from_options(&map)
}

fn run(
    pairs: &[(&str, &str)],
    ctx: CloudEventsContext,
    headers: &[ConnectHeader],
    schema: Option<&Schema>,
    value: &Value,
) -> Result<Option<String>, ConvertError> {
    let conv = CloudEventsConverter::new(config(pairs).expect("config"), ctx);
    conv.from_connect_data("topic", headers, schema, value)
        .map(|b| b.map(|b| String::from_utf8(b.to_vec()).expect("utf-8")))
}

fn ok(r: Result<Option<String>, ConvertError>) -> String {
    r.expect("converts").expect("not null")
}

fn refused(r: Result<Option<String>, ConvertError>) -> String {
    match r {
        Err(ConvertError::Refused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

use crate::connect::transforms::TransformConfigError;

const HEAD: &str = concat!(
    r#"{"id":"name:test_server;lsn:24023928;txId:565;sequence:[null,\"24023928\"]","#,
    r#""source":"/debezium/postgresql/test_server","specversion":"1.0","#,
    r#""type":"io.debezium.connector.postgresql.DataChangeEvent","#,
    r#""time":"2020-01-13T13:55:39.738Z","datacontenttype":"application/json","#
);

const EXT: &str = concat!(
    r#""iodebeziumop":"c","iodebeziumversion":"3.6.1.Final","iodebeziumconnector":"postgresql","#,
    r#""iodebeziumname":"test_server","iodebeziumtsms":"1578923739738","iodebeziumsnapshot":"false","#,
    r#""iodebeziumdb":"postgres","iodebeziumsequence":"[null,\"24023928\"]","#,
    r#""iodebeziumtsus":"1578923739738123","iodebeziumtsns":"1578923739738123000","#,
    r#""iodebeziumschema":"s1","iodebeziumtable":"a","iodebeziumtxId":"565","#,
    r#""iodebeziumlsn":"24023928","iodebeziumxmin":null,"iodebeziumorigin":null,"iodebeziumoriginlsn":null,"#
);

const NO_TX: &str = r#""iodebeziumtxid":null,"iodebeziumtxtotalorder":null,"iodebeziumtxdatacollectionorder":null,"#;

const ROW_SCHEMA: &str = concat!(
    r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"pk"},"#,
    r#"{"type":"int32","optional":true,"field":"aa"}],"optional":true,"name":"test_server.s1.a.Value""#
);

fn envelope_data() -> String {
    format!(
        concat!(
            r#""data":{{"schema":{{"type":"struct","fields":[{row},"field":"before"}},{row},"field":"after"}}],"#,
            r#""optional":false,"name":"io.debezium.connector.postgresql.Data"}},"#,
            r#""payload":{{"before":null,"after":{{"pk":1,"aa":1}}}}}}}}"#
        ),
        row = ROW_SCHEMA
    )
}

// The shape of the first example in cloudevents.adoc; `iodebeziumtxId`
// keeps its capital (adjustExtensionName keeps A-Z).
#[test]
fn envelope_with_defaults() {
    let out = ok(run(
        &[],
        CloudEventsContext::default(),
        &[],
        Some(&envelope_schema()),
        &envelope("postgresql", Value::Null),
    ));
    assert_eq!(out, format!("{HEAD}{EXT}{NO_TX}{}", envelope_data()));
}

#[test]
fn envelope_with_transaction_block() {
    let out = ok(run(
        &[],
        CloudEventsContext::default(),
        &[],
        Some(&envelope_schema()),
        &envelope("postgresql", tx_value()),
    ));
    let tx = r#""iodebeziumtxid":"565:24023928","iodebeziumtxtotalorder":"1","iodebeziumtxdatacollectionorder":"1","#;
    assert_eq!(out, format!("{HEAD}{EXT}{tx}{}", envelope_data()));
}

// json.schemas.enable=false: the regular JsonConverter writes the whole
// event, `data` without a schema envelope.
#[test]
fn envelope_without_data_schema() {
    let out = ok(run(
        &[("json.schemas.enable", "false")],
        CloudEventsContext::default(),
        &[],
        Some(&envelope_schema()),
        &envelope("postgresql", Value::Null),
    ));
    assert_eq!(
        out,
        format!(r#"{HEAD}{EXT}{NO_TX}"data":{{"before":null,"after":{{"pk":1,"aa":1}}}}}}"#)
    );
}

// CloudEventsConverterTest.shouldConvertToCloudEventsInJsonWithoutExtensionAttributes:
// exactly seven attributes.
#[test]
fn without_extension_attributes() {
    let out = ok(run(
        &[("extension.attributes.enable", "false")],
        CloudEventsContext::default(),
        &[],
        Some(&envelope_schema()),
        &envelope("postgresql", Value::Null),
    ));
    assert_eq!(out, format!("{HEAD}{}", envelope_data()));
}

// CloudEventsConverterIT (DBZ-3642, DBZ-7016): HeaderFrom copies source,
// op and transaction into headers, the EventRouter adds id and type, the
// worker's header converter is JsonConverter with schemas; the event's
// data is every field of the routed value, named
// io.debezium.connector.postgresql.Data.
#[test]
fn outbox_with_metadata_in_headers() {
    let out = ok(run(
        &[("metadata.source", "header")],
        json_headers(),
        &outbox_headers(),
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    let expected = format!(
        concat!(
            r#"{{"id":"59a42efd-b015-44a9-9dde-cb36d9002425","source":"/debezium/postgresql/test_server","#,
            r#""specversion":"1.0","type":"UserCreated","time":"2020-01-13T13:55:39.738Z","#,
            r#""datacontenttype":"application/json",{ext}{tx}"#,
            r#""data":{{"schema":{{"type":"struct","fields":[{{"type":"string","optional":true,"field":"someField1"}},"#,
            r#"{{"type":"int32","optional":true,"field":"someField2"}}],"optional":false,"#,
            r#""name":"io.debezium.connector.postgresql.Data"}},"#,
            r#""payload":{{"someField1":"some value 1","someField2":7005}}}}}}"#
        ),
        ext = EXT,
        tx = NO_TX
    );
    assert_eq!(out, expected);
}

// metadata.source=header without schemas for data, and the transaction
// header set.
#[test]
fn outbox_headers_with_transaction_and_plain_data() {
    let mut headers = outbox_headers();
    headers[2] = header("transaction", tx_schema(), tx_value());
    let out = ok(run(
        &[
            ("metadata.source", "header"),
            ("json.schemas.enable", "false"),
        ],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert!(out.ends_with(concat!(
        r#""iodebeziumtxid":"565:24023928","iodebeziumtxtotalorder":"1","iodebeziumtxdatacollectionorder":"1","#,
        r#""data":{"someField1":"some value 1","someField2":7005}}"#
    )));
    assert!(out.starts_with(r#"{"id":"59a42efd-b015-44a9-9dde-cb36d9002425","#));
}

// DBZ-7284/DBZ-8669 (the JSON half): dataSchemaName from a header needs
// schema.data.name.source.header.enable; traceparent needs
// opentelemetry.tracing.attributes.enable and sits after datacontenttype.
#[test]
fn outbox_data_schema_name_and_traceparent_from_headers() {
    let mut headers = outbox_headers();
    headers.push(header(
        "dataSchemaName",
        req(Type::String),
        Value::string("User"),
    ));
    headers.push(header(
        "traceparent",
        req(Type::String),
        Value::string("00-f99aefa4b9c40a436432b62f851a8159-526f14c08e12c3b9-01"),
    ));
    let opts = [
        ("metadata.source", "header"),
        ("opentelemetry.tracing.attributes.enable", "true"),
        ("schema.data.name.source.header.enable", "true"),
        ("extension.attributes.enable", "false"),
    ];
    let out = ok(run(
        &opts,
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert!(out.contains(concat!(
        r#""datacontenttype":"application/json","#,
        r#""traceparent":"00-f99aefa4b9c40a436432b62f851a8159-526f14c08e12c3b9-01","data":"#
    )));
    assert!(out.ends_with(
        r#""optional":false,"name":"User"},"payload":{"someField1":"some value 1","someField2":7005}}}"#
    ));
    // Without the flag the name is generated.
    let out = ok(run(
        &opts[..2],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert!(out.contains(r#""name":"io.debezium.connector.postgresql.Data"}"#));
    // The traceparent header is optional, its attribute is not.
    headers.pop();
    assert_eq!(
        refused(run(
            &opts,
            json_headers(),
            &headers,
            Some(&outbox_schema()),
            &outbox_value()
        )),
        "Invalid value: null used for required field: \"traceparent\", schema type: STRING"
    );
    // A missing dataSchemaName header is an error. With data schemas on,
    // the event is built (and fails on traceparent) before data; without
    // them the data arguments are evaluated first.
    headers.retain(|h| &*h.key != "dataSchemaName");
    assert!(refused(run(
        &opts,
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value()
    ))
    .contains("\"traceparent\""));
    let mut plain = opts.to_vec();
    plain.push(("json.schemas.enable", "false"));
    assert_eq!(
        refused(run(
            &plain,
            json_headers(),
            &headers,
            Some(&outbox_schema()),
            &outbox_value()
        )),
        "Header `dataSchemaName` was not provided"
    );
}

// RecordAndMetadataHeaderImpl: id and type are not optional headers.
#[test]
fn outbox_missing_id_or_type_header() {
    for missing in ["id", "type"] {
        let mut headers = outbox_headers();
        headers.retain(|h| &*h.key != missing);
        assert_eq!(
            refused(run(
                &[("metadata.source", "header")],
                json_headers(),
                &headers,
                Some(&outbox_schema()),
                &outbox_value()
            )),
            format!("Header `{missing}` was not provided")
        );
    }
    // header,id:generate: the maker's id from the header's source block.
    let mut headers = outbox_headers();
    headers.retain(|h| &*h.key != "id");
    let out = ok(run(
        &[("metadata.source", "header,id:generate")],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert!(out.starts_with(
        r#"{"id":"name:test_server;lsn:24023928;txId:565;sequence:[null,\"24023928\"]","#
    ));
}

// fromConnectData returns null when the source or op header is absent
// (heartbeats and tombstones the HeaderFrom predicate skipped).
#[test]
fn outbox_without_source_or_op_header_is_null() {
    for missing in ["source", "op"] {
        let mut headers = outbox_headers();
        headers.retain(|h| &*h.key != missing);
        assert_eq!(
            run(
                &[("metadata.source", "header")],
                json_headers(),
                &headers,
                Some(&outbox_schema()),
                &outbox_value()
            )
            .unwrap(),
            None
        );
    }
}

// Tombstones and schemaless records are null before anything else.
#[test]
fn tombstones_and_schemaless_records_are_null() {
    for pairs in [&[][..], &[("metadata.source", "header")][..]] {
        assert_eq!(
            run(
                pairs,
                json_headers(),
                &outbox_headers(),
                Some(&outbox_schema()),
                &Value::Null
            )
            .unwrap(),
            None
        );
        assert_eq!(
            run(
                pairs,
                json_headers(),
                &outbox_headers(),
                None,
                &outbox_value()
            )
            .unwrap(),
            None
        );
    }
}

// metadata.source=value: anything but a *.Envelope schema is null (the
// EventRouter's output, a heartbeat); an unnamed schema is a
// NullPointerException in Envelope.isEnvelopeSchema (a string key).
#[test]
fn value_source_skips_non_envelopes() {
    assert_eq!(
        run(
            &[],
            json_headers(),
            &outbox_headers(),
            Some(&outbox_schema()),
            &outbox_value()
        )
        .unwrap(),
        None
    );
    let heartbeat = Schema::structure(
        Some("io.debezium.connector.common.Heartbeat"),
        vec![field("ts_ms", req(Type::Int64))],
    );
    assert_eq!(
        run(
            &[],
            json_headers(),
            &[],
            Some(&heartbeat),
            &Value::Struct(vec![Value::Int64(1)])
        )
        .unwrap(),
        None
    );
    let key = Schema::new(Type::String);
    assert!(refused(run(
        &[],
        json_headers(),
        &[],
        Some(&key),
        &Value::string("10711fa5")
    ))
    .contains("NullPointerException"));
}

// metadata.source=header and a value that is no struct: DataException
// "Mismatching schema" (a non-expanded payload, or the key converter).
#[test]
fn header_source_refuses_non_struct_values() {
    let json = Schema::optional(Type::String).named("io.debezium.data.Json", Some(1));
    assert_eq!(
        refused(run(
            &[("metadata.source", "header")],
            json_headers(),
            &outbox_headers(),
            Some(&json),
            &Value::string("{}")
        )),
        "Mismatching schema"
    );
}

// The worker's default SimpleHeaderConverter writes the source struct as
// plain JSON, which Debezium's JsonConverter (schemas.enable=true) refuses.
#[test]
fn headers_must_be_json_with_schemas() {
    let msg = refused(run(
        &[("metadata.source", "header")],
        CloudEventsContext::default(),
        &outbox_headers(),
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert!(
        msg.starts_with("JsonConverter with schemas.enable requires \"schema\" and \"payload\"")
    );
    let ctx = CloudEventsContext {
        header_converter: HeaderConverterKind::Json,
        header_schemas_enable: false,
    };
    let msg = refused(run(
        &[("metadata.source", "header")],
        ctx,
        &outbox_headers(),
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert!(msg.starts_with("JsonConverter with schemas.enable requires"));
    // StringConverter writes Struct{...}: no JSON at all.
    let ctx = CloudEventsContext {
        header_converter: HeaderConverterKind::String,
        header_schemas_enable: true,
    };
    let msg = refused(run(
        &[("metadata.source", "header")],
        ctx,
        &outbox_headers(),
        Some(&outbox_schema()),
        &outbox_value(),
    ));
    assert_eq!(
        msg,
        "Converting byte[] to Kafka Connect data failed due to serialization error: "
    );
}

// AbstractCloudEventsConverterTest.shouldConvertToCloudEventsInJsonWithIdFromHeaderAndGeneratedType:
// InsertHeader's literal id on an envelope record.
#[test]
fn id_from_header_and_generated_type() {
    let headers = [header(
        "id",
        req(Type::String),
        Value::string("77742efd-b015-44a9-9dde-cb36d9002425"),
    )];
    let out = ok(run(
        &[("metadata.source", "value,id:header,type:generate")],
        json_headers(),
        &headers,
        Some(&envelope_schema()),
        &envelope("postgresql", Value::Null),
    ));
    let head = HEAD.replace(
        r#"name:test_server;lsn:24023928;txId:565;sequence:[null,\"24023928\"]"#,
        "77742efd-b015-44a9-9dde-cb36d9002425",
    );
    assert_eq!(out, format!("{head}{EXT}{NO_TX}{}", envelope_data()));
    // A non-string id header: the cast to String fails.
    let headers = [header("id", req(Type::Int32), Value::Int32(7))];
    assert!(refused(run(
        &[("metadata.source", "value,id:header")],
        json_headers(),
        &headers,
        Some(&envelope_schema()),
        &envelope("postgresql", Value::Null),
    ))
    .contains("class java.lang.Integer cannot be cast to class java.lang.String"));
}

// metadata.source=value alone: id and type come from the value, where the
// base implementation has none, so Struct.put refuses the null id.
#[test]
fn value_sources_for_id_fail() {
    assert_eq!(
        refused(run(
            &[("metadata.source", "value")],
            json_headers(),
            &[],
            Some(&envelope_schema()),
            &envelope("postgresql", Value::Null),
        )),
        "Invalid value: null used for required field: \"id\", schema type: STRING"
    );
}

// opentelemetry on with traceparent:generate uses the base
// implementation, which cannot read a traceparent.
#[test]
fn traceparent_from_value_fails() {
    assert_eq!(
        refused(run(
            &[
                ("opentelemetry.tracing.attributes.enable", "true"),
                ("metadata.source", "value,id:generate,type:generate,traceparent:generate"),
            ],
            json_headers(),
            &[],
            Some(&envelope_schema()),
            &envelope("postgresql", Value::Null),
        )),
        "Value for `traceparent` CloudEvents field currently can't be obtained from a record value and can only be obtained from a record header"
    );
}

// lookupCloudEventsProvider: a PostgreSQL plugin carries one provider.
#[test]
fn other_connectors_have_no_provider() {
    assert_eq!(
        refused(run(
            &[],
            json_headers(),
            &[],
            Some(&envelope_schema()),
            &envelope("mysql", Value::Null),
        )),
        "No usable CloudEvents converters for connector type \"mysql\""
    );
}

// convertToCeExtensionSchema and the SchemaBuilder's duplicate check.
#[test]
fn source_blocks_that_cannot_be_extension_attributes() {
    let mut headers = outbox_headers();
    let mut s = source_schema();
    s.fields.push(field("rate", opt(Type::Float64)));
    let mut v = source_value("postgresql");
    if let Value::Struct(values) = &mut v {
        values.push(Value::Null);
    }
    headers[0] = header("source", s.clone(), v.clone());
    let r = run(
        &[("metadata.source", "header")],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    );
    assert_eq!(
        refused(r),
        "Source field of type FLOAT64 cannot be converted into CloudEvents extension attribute."
    );
    s.fields.pop();
    s.fields.push(field("o_p", opt(Type::String)));
    headers[0] = header("source", s, v);
    let r = run(
        &[("metadata.source", "header")],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    );
    assert_eq!(
        refused(r),
        "Cannot create field because of field name duplication iodebeziumop"
    );
}

#[test]
fn names_and_times() {
    assert_eq!(extension_name("ts_ms"), "iodebeziumtsms");
    assert_eq!(extension_name("txId"), "iodebeziumtxId");
    assert_eq!(
        extension_name("data_collection_order"),
        "iodebeziumdatacollectionorder"
    );
    assert_eq!(format_utc_millis(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(format_utc_millis(-1), "1969-12-31T23:59:59.999Z");
    assert_eq!(
        format_utc_millis(253_402_300_800_000),
        "10000-01-01T00:00:00.000Z"
    );
    // GregorianCalendar: the day before 1582-10-15 is Julian 1582-10-04.
    assert_eq!(
        format_utc_millis(-12_219_292_800_000),
        "1582-10-15T00:00:00.000Z"
    );
    assert_eq!(
        format_utc_millis(-12_219_292_800_001),
        "1582-10-04T23:59:59.999Z"
    );
    // Year of era: 1 BC is 0001.
    assert_eq!(
        format_utc_millis(-62_135_769_600_001).get(..4),
        Some("0001")
    );
}

// CloudEventsConverterConfig and the json.* options.
#[test]
fn options_and_their_refusals() {
    let d = config(&[]).unwrap();
    assert_eq!(d, CloudEventsConfig::default());
    assert!(d.data_schemas_enable && d.extension_attributes && !d.opentelemetry_tracing_attributes);
    assert_eq!(d.schema_name_adjustment, SchemaNameAdjustmentMode::Avro);
    use MetadataSourceValue::*;
    // traceparent:header falls back to generate without OpenTelemetry.
    assert_eq!(
        d.metadata_source,
        MetadataSource {
            global: Value,
            id: Generate,
            type_: Generate,
            trace_parent: Generate,
            data_schema_name: Generate
        }
    );
    let h = config(&[("metadata.source", " HEADER ")])
        .unwrap()
        .metadata_source;
    assert_eq!(
        h,
        MetadataSource {
            global: Header,
            id: Header,
            type_: Header,
            trace_parent: Generate,
            data_schema_name: Generate
        }
    );
    let h = config(&[
        ("metadata.source", "header"),
        ("opentelemetry.tracing.attributes.enable", "true"),
        ("schema.data.name.source.header.enable", "TRUE"),
    ])
    .unwrap()
    .metadata_source;
    assert_eq!((h.trace_parent, h.data_schema_name), (Header, Header));
    let m = config(&[("metadata.source", "value,id:header:x,type:GENERATE")])
        .unwrap()
        .metadata_source;
    assert_eq!((m.id, m.type_), (Header, Generate));
    for (v, msg) in [
        ("generate", "Global metadata source can't be GENERATE"),
        ("value,id:value", "Field metadata source can't be VALUE"),
        ("value,id:xyz", "Field source `xyz` is not valid"),
        (
            "value,op:header",
            "Field `op` is not allowed to set custom source",
        ),
        (
            "value,ID:header",
            "Field `ID` is not allowed to set custom source",
        ),
    ] {
        let e = config(&[("metadata.source", v)]).unwrap_err();
        assert!(
            matches!(&e, TransformConfigError::Invalid { key, reason, .. } if key == "metadata.source" && reason == msg),
            "{v}: {e:?}"
        );
    }
    for v in ["", "foo", "value,id", "value,"] {
        assert_eq!(
            config(&[("metadata.source", v)]).unwrap_err().key(),
            Some("metadata.source"),
            "{v}"
        );
    }
    for (k, v) in [
        ("serializer.type", "avro"),
        ("serializer.type", "xml"),
        ("data.serializer.type", "avro"),
        ("data.serializer.type", "protobuf"),
        ("json.decimal.format", "NUMERIC"),
        ("json.decimal.format", "text"),
        ("json.replace.null.with.default", "false"),
        ("json.schemas.enable", "yes"),
        ("json.schemas.cache.size", "many"),
        ("extension.attributes.enable", "1"),
        ("opentelemetry.tracing.attributes.enable", "on"),
        ("schema.data.name.source.header.enable", "no"),
        ("schema.name.adjustment.mode", "strict"),
    ] {
        assert_eq!(config(&[(k, v)]).unwrap_err().key(), Some(k), "{k}={v}");
    }
    match config(&[
        ("serializer.type", "avro"),
        ("data.serializer.type", "json"),
    ])
    .unwrap_err()
    {
        TransformConfigError::Invalid { reason, .. } => {
            assert_eq!(
                reason,
                "Cannot use 'application/json' data content type within Avro events"
            );
        }
        other => panic!("{other:?}"),
    }
    let c = config(&[
        ("serializer.type", " JSON "),
        ("data.serializer.type", "Json"),
        ("json.decimal.format", "base64"),
        ("json.schemas.cache.size", "5"),
        ("schema.name.adjustment.mode", "avro_unicode"),
        ("schema.cloudevents.name", "TestSchemaName1"),
        ("avro.schema.registry.url", "http://ignored"),
    ])
    .unwrap();
    assert_eq!(
        c.schema_name_adjustment,
        SchemaNameAdjustmentMode::AvroUnicode
    );
    assert_eq!(
        c.cloudevents_schema_name.as_deref(),
        Some("TestSchemaName1")
    );
}

// schema.cloudevents.name skips the name/db lookups of ceSchemaName; with
// it unset a source block without `db` fails there.
#[test]
fn cloudevents_schema_name_and_missing_source_fields() {
    let mut headers = outbox_headers();
    let mut s = source_schema();
    let i = s.field_index("db").unwrap();
    s.fields.remove(i);
    let mut v = source_value("postgresql");
    if let Value::Struct(values) = &mut v {
        values.remove(i);
    }
    headers[0] = header("source", s, v);
    let r = run(
        &[("metadata.source", "header")],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    );
    assert_eq!(refused(r), "db is not a valid field name");
    let r = run(
        &[
            ("metadata.source", "header"),
            ("schema.cloudevents.name", "X"),
        ],
        json_headers(),
        &headers,
        Some(&outbox_schema()),
        &outbox_value(),
    );
    assert!(ok(r).contains(r#""iodebeziumname":"test_server","iodebeziumtsms""#));
}
