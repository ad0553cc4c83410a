//! Tests of Debezium's transforms after the router: expected values come
//! from Debezium 3.6.1's source (the Java branch is named where an
//! expectation is surprising) and its own tests (`PartitionRoutingTest`'s
//! partitions 39 and 65, `HeaderToValueTest`'s messages); the hash vectors
//! were computed with the JDK and Debezium's `MurmurHash3`.

use std::sync::Arc;

use bytes::Bytes;

use super::partition::{test_java_hash, test_murmur};
use super::*;
use crate::connect::transforms::{ConnectHeader, Options};
use crate::connect::{Decimal, Field};

// ----------------------------------------------------------------- helpers

/// Builds `class` from `opts`.
fn configured(class: &str, opts: &[(&str, &str)]) -> Built {
    let o: Options = opts.iter().copied().collect();
    build(class, &o.reader()).expect("a Debezium class")
}

/// A configured transform.
fn t(class: &str, opts: &[(&str, &str)]) -> Box<dyn Transformation> {
    configured(class, opts).expect("valid options")
}

/// The config error of `class` with `opts`.
fn config_err(class: &str, opts: &[(&str, &str)]) -> TransformConfigError {
    configured(class, opts).expect_err("invalid options")
}

/// `Invalid value <value> for configuration <key>: <reason>`.
fn invalid(key: &str, value: &str, reason: &str) -> TransformConfigError {
    TransformConfigError::invalid(key, value, reason)
}

/// Applies `t`, expecting a record.
fn apply(t: &dyn Transformation, r: ConnectRecord) -> ConnectRecord {
    t.apply(r).expect("transformed").expect("kept")
}

/// Applies `t`, expecting a failure.
fn fail(t: &dyn Transformation, r: ConnectRecord) -> String {
    t.apply(r).expect_err("refused").message
}

/// A STRING value.
fn s(v: &str) -> Value {
    Value::string(v)
}

/// An Arc'd schema.
fn a(s: Schema) -> Arc<Schema> {
    Arc::new(s)
}

/// A struct schema of `fields`.
fn structure(name: Option<&str>, fields: Vec<(&str, Schema)>) -> Schema {
    Schema::structure(
        name,
        fields
            .into_iter()
            .map(|(n, s)| Field {
                name: Arc::from(n),
                schema: Arc::new(s),
            })
            .collect(),
    )
}

/// A STRING header.
fn header(key: &str, v: &str) -> ConnectHeader {
    ConnectHeader {
        key: Arc::from(key),
        schema: Some(a(Schema::new(Type::String))),
        value: s(v),
    }
}

/// A record as the EventRouter emits it: routed topic, the aggregate id
/// as a STRING key, `value` with `schema`, Debezium's context header and
/// the `id` header.
fn routed(schema: Option<Schema>, value: Value) -> ConnectRecord {
    ConnectRecord {
        topic: Arc::from("outbox.event.order"),
        partition: None,
        key_schema: Some(a(Schema::new(Type::String))),
        key: s("42"),
        value_schema: schema.map(a),
        value,
        timestamp: Some(1_700_000_000_000),
        headers: vec![
            header("__debezium.context.connectorLogicalName", "app"),
            header("id", "a6c1"),
        ],
    }
}

/// The router's usual value: a JSON payload column as `io.debezium.data.Json`.
fn json_payload() -> ConnectRecord {
    let schema = Schema::optional(Type::String).named("io.debezium.data.Json", Some(1));
    routed(Some(schema), s("{\"a\":1}"))
}

/// A tombstone from the router: null value, null schema.
fn tombstone() -> ConnectRecord {
    routed(None, Value::Null)
}

/// The product row schema of Debezium's `PartitionRoutingTest`.
fn product_schema() -> Schema {
    structure(
        Some("product"),
        vec![
            ("id", Schema::new(Type::Int64)),
            ("price", Schema::new(Type::Float32)),
            ("product", Schema::new(Type::String)),
        ],
    )
    .with_optional(true)
}

/// A change envelope named `server1.inventory.product.Envelope` (as a
/// route value or `SetSchemaMetadata` could name the router's value).
fn envelope(op: &str, before: Value, after: Value) -> ConnectRecord {
    let source = structure(
        Some("source"),
        vec![
            ("connector", Schema::new(Type::String)),
            ("table", Schema::new(Type::String)),
        ],
    );
    let schema = structure(
        Some("server1.inventory.product.Envelope"),
        vec![
            ("before", product_schema()),
            ("after", product_schema()),
            ("source", source),
            ("op", Schema::new(Type::String)),
            ("ts_ms", Schema::optional(Type::Int64)),
        ],
    );
    let source_value = Value::Struct(vec![s("postgresql"), s("products")]);
    let value = Value::Struct(vec![before, after, source_value, s(op), Value::Int64(5)]);
    routed(Some(schema), value)
}

/// The row `(1, 1.0, orange)`.
fn orange() -> Value {
    Value::Struct(vec![Value::Int64(1), Value::Float32(1.0), s("orange")])
}

// ------------------------------------------------------- classes, options

#[test]
fn every_class_is_listed_and_other_classes_are_not_built() {
    assert_eq!(CLASSES.len(), 4);
    for c in CLASSES {
        let o = Options::default();
        assert!(build(c, &o.reader()).is_some(), "{c}");
    }
    let o = Options::default();
    assert!(build("io.debezium.transforms.ExtractNewRecordState", &o.reader()).is_none());
}

#[test]
fn debezium_lists_split_as_java_split_does() {
    // `"h1,"` drops the trailing empty item; `","` is no item at all.
    assert_eq!(debezium_list(Some("h1,")), ["h1"]);
    assert_eq!(debezium_list(Some(" a , b ")), ["a", "b"]);
    assert_eq!(debezium_list(Some("")), [""]);
    assert!(debezium_list(Some(",")).is_empty());
    assert_eq!(debezium_list(Some(" , ")), ["", ""]);
    assert!(debezium_list(None).is_empty());
    assert_eq!(java_split("a..b.", '.'), ["a", "", "b"]);
}

#[test]
fn validation_follows_the_hash_map_order_of_option_names() {
    // Configuration.validate collects into a HashMap: the first failing
    // option in its iteration order is reported.
    let order = crate::connect::java::java_hash_map_order(vec![
        ("fields", ()),
        ("headers", ()),
        ("operation", ()),
    ]);
    let names: Vec<&str> = order.iter().map(|(k, _)| *k).collect();
    assert_eq!(names, ["headers", "fields", "operation"]);
    let order = crate::connect::java::java_hash_map_order(vec![
        ("partition.payload.fields", ()),
        ("partition.topic.num", ()),
    ]);
    assert_eq!(order[0].0, "partition.topic.num");
}

// ----------------------------------------------------------- HeaderToValue

const H2V: &str = "io.debezium.transforms.HeaderToValue";

#[test]
fn header_to_value_options_are_validated_as_debezium_does() {
    let required = |k: &str| {
        invalid(
            k,
            "null",
            &format!("The '{k}' value is invalid: A value is required"),
        )
    };
    assert_eq!(
        config_err(H2V, &[("headers", "h1"), ("operation", "copy")]),
        required("fields")
    );
    assert_eq!(
        config_err(H2V, &[("fields", "f1"), ("operation", "copy")]),
        required("headers")
    );
    assert_eq!(
        config_err(H2V, &[("operation", "copy")]),
        required("headers")
    );
    assert_eq!(
        config_err(H2V, &[("headers", "h1"), ("fields", "f1")]),
        required("operation")
    );
    assert_eq!(
        config_err(
            H2V,
            &[
                ("headers", "h1"),
                ("fields", "f1"),
                ("operation", "invalidOp")
            ]
        ),
        invalid(
            "operation",
            "invalidOp",
            "The 'operation' value is invalid: Value must be one of move, copy"
        )
    );
}

#[test]
fn header_to_value_list_options_refuse_empty_and_spaced_items() {
    assert_eq!(
        config_err(
            H2V,
            &[
                ("headers", "h1,h2"),
                ("fields", ",f2"),
                ("operation", "copy")
            ]
        ),
        invalid(
            "fields",
            ",f2",
            "The 'fields' value is invalid: Empty string element(s) not permitted"
        )
    );
    assert_eq!(
        config_err(
            H2V,
            &[
                ("headers", "header one"),
                ("fields", "f1"),
                ("operation", "copy")
            ]
        ),
        invalid(
            "headers",
            "header one",
            "The 'headers' value is invalid: Element(s) containing space not permitted"
        )
    );
    assert_eq!(
        config_err(
            H2V,
            &[
                ("headers", "h"),
                ("fields", "after. f"),
                ("operation", "copy")
            ]
        ),
        invalid(
            "fields",
            "after. f",
            "The 'fields' value is invalid: Element(s) containing space not permitted"
        )
    );
    assert_eq!(
        config_err(
            H2V,
            &[
                ("headers", "h1,h2"),
                ("fields", "f1"),
                ("operation", "copy")
            ]
        ),
        invalid(
            "fields",
            "f1",
            "'fields' config must have the same number of elements as 'headers' config."
        )
    );
    // "h1," is one header; " MOVE " is move (trimmed, any case).
    assert!(configured(
        H2V,
        &[
            ("headers", "h1,"),
            ("fields", "f1"),
            ("operation", " MOVE ")
        ]
    )
    .is_ok());
    assert_eq!(
        config_err(
            H2V,
            &[("headers", "  "), ("fields", "f1"), ("operation", "copy")]
        ),
        invalid(
            "headers",
            "  ",
            "The 'headers' value is invalid: A value is required"
        )
    );
}

/// `{id: INT64, product: STRING, n: optional INT32 default 7}` named
/// `order.Value`, version 3, optional, with a doc.
fn order_schema() -> Schema {
    let mut n = Schema::optional(Type::Int32);
    n.default = Some(Value::Int32(7));
    let mut schema = structure(
        Some("order.Value"),
        vec![
            ("id", Schema::new(Type::Int64)),
            ("product", Schema::new(Type::String)),
            ("n", n),
        ],
    );
    schema.version = Some(3);
    schema.doc = Some(Arc::from("an order"));
    schema.optional = true;
    schema
}

/// An expanded payload record with the order struct and `headers`.
fn order_record(headers: Vec<ConnectHeader>) -> ConnectRecord {
    let mut r = routed(
        Some(order_schema()),
        Value::Struct(vec![Value::Int64(101), s("a product"), Value::Null]),
    );
    r.headers.extend(headers);
    r
}

#[test]
fn header_to_value_passes_tombstones_and_refuses_other_values_than_structs() {
    let h = t(
        H2V,
        &[
            ("headers", "id"),
            ("fields", "event_id"),
            ("operation", "copy"),
        ],
    );
    assert_eq!(apply(&*h, tombstone()), tombstone());
    // The router's usual payload is a string: requireStruct refuses it.
    assert_eq!(
        fail(&*h, json_payload()),
        "Only Struct objects supported for [Header field insertion], found: java.lang.String"
    );
    let map = routed(None, Value::Map(vec![(s("a"), s("b"))]));
    assert_eq!(
        fail(&*h, map),
        "Only Struct objects supported for [Header field insertion], found: java.util.HashMap"
    );
    // No configured header on the record: unchanged.
    let h = t(
        H2V,
        &[
            ("headers", "absent"),
            ("fields", "f"),
            ("operation", "move"),
        ],
    );
    assert_eq!(apply(&*h, order_record(vec![])), order_record(vec![]));
}

#[test]
fn header_to_value_copies_headers_into_new_fields() {
    let h = t(
        H2V,
        &[
            ("headers", "id,h2"),
            ("fields", "event_id, f2"),
            ("operation", "copy"),
        ],
    );
    let mut h2 = header("h2", "");
    h2.schema = Some(a(Schema::optional(Type::Int32)));
    h2.value = Value::Int32(9);
    let out = apply(&*h, order_record(vec![h2]));
    let schema = out.value_schema.as_deref().expect("schema");
    // copySchemaBasics: name, version and doc kept, optionality dropped.
    assert_eq!(schema.name.as_deref(), Some("order.Value"));
    assert_eq!(schema.version, Some(3));
    assert_eq!(schema.doc.as_deref(), Some("an order"));
    assert!(!schema.optional);
    let names: Vec<&str> = schema.fields.iter().map(|f| &*f.name).collect();
    assert_eq!(names, ["id", "product", "n", "event_id", "f2"]);
    assert_eq!(*schema.fields[3].schema, Schema::new(Type::String));
    assert_eq!(*schema.fields[4].schema, Schema::optional(Type::Int32));
    // Struct.get applied n's default when the value was copied.
    assert_eq!(
        out.value,
        Value::Struct(vec![
            Value::Int64(101),
            s("a product"),
            Value::Int32(7),
            s("a6c1"),
            Value::Int32(9)
        ])
    );
    assert_eq!(out.headers.len(), 3, "copy keeps the headers");
    assert_eq!(out.key, s("42"));
}

#[test]
fn header_to_value_move_removes_every_configured_header() {
    let h = t(
        H2V,
        &[
            ("headers", "id,gone"),
            ("fields", "event_id,g"),
            ("operation", "move"),
        ],
    );
    // Two `id` headers: the field takes the first one's schema, the last
    // put wins its value; Headers.remove drops both, and `gone` although
    // it had no header.
    let out = apply(
        &*h,
        order_record(vec![header("id", "second"), header("keep", "k")]),
    );
    let keys: Vec<&str> = out.headers.iter().map(|h| &*h.key).collect();
    assert_eq!(keys, ["__debezium.context.connectorLogicalName", "keep"]);
    let schema = out.value_schema.as_deref().expect("schema");
    assert_eq!(schema.fields.len(), 4);
    match &out.value {
        Value::Struct(v) => assert_eq!(v[3], s("second")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn header_to_value_nests_into_existing_and_new_structs() {
    let inner = structure(None, vec![("x", Schema::new(Type::Int32))]).with_optional(true);
    let schema = structure(
        Some("v"),
        vec![("after", inner), ("s", Schema::new(Type::String))],
    );
    let rec = |after: Value| {
        let mut r = routed(Some(schema.clone()), Value::Struct(vec![after, s("t")]));
        r.headers.push(header("h", "hv"));
        r.headers.push(header("m", "mv"));
        r
    };
    let h = t(
        H2V,
        &[
            ("headers", "h,m"),
            ("fields", "after.h,meta.m"),
            ("operation", "copy"),
        ],
    );
    let out = apply(&*h, rec(Value::Struct(vec![Value::Int32(1)])));
    let schema_out = out.value_schema.as_deref().expect("schema");
    let after = &schema_out.fields[0].schema;
    // buildNewSchema rebuilds `after` with copySchemaBasics: no longer optional.
    assert!(!after.optional);
    assert_eq!(after.fields.len(), 2);
    let meta = &schema_out.fields[2].schema;
    assert_eq!(&*schema_out.fields[2].name, "meta");
    assert!(meta.optional && meta.name.is_none());
    assert_eq!(
        out.value,
        Value::Struct(vec![
            Value::Struct(vec![Value::Int32(1), s("hv")]),
            s("t"),
            Value::Struct(vec![s("mv")]),
        ])
    );
    // A null `after` is not put: it stays null in a now-required field.
    let out = apply(&*h, rec(Value::Null));
    match &out.value {
        Value::Struct(v) => assert_eq!(v[0], Value::Null),
        other => panic!("{other:?}"),
    }
}

#[test]
fn header_to_value_new_parent_below_the_top_gets_no_fields() {
    // getNestedFieldNameForParent compares "after.newp" with "newp" below
    // the top level, so the header is dropped and `newp` is empty.
    let inner = structure(None, vec![("x", Schema::new(Type::Int32))]);
    let schema = structure(Some("v"), vec![("after", inner)]);
    let mut r = routed(
        Some(schema),
        Value::Struct(vec![Value::Struct(vec![Value::Int32(1)])]),
    );
    r.headers.push(header("h", "hv"));
    let h = t(
        H2V,
        &[
            ("headers", "h"),
            ("fields", "after.newp.f"),
            ("operation", "copy"),
        ],
    );
    let out = apply(&*h, r);
    let after = &out.value_schema.as_deref().expect("schema").fields[0].schema;
    assert_eq!(&*after.fields[1].name, "newp");
    assert!(after.fields[1].schema.fields.is_empty());
    assert_eq!(
        out.value,
        Value::Struct(vec![Value::Struct(vec![
            Value::Int32(1),
            Value::Struct(vec![])
        ])])
    );
}

#[test]
fn header_to_value_refuses_what_debezium_refuses() {
    let h = t(
        H2V,
        &[
            ("headers", "id"),
            ("fields", "product.x"),
            ("operation", "copy"),
        ],
    );
    assert_eq!(
        fail(&*h, order_record(vec![])),
        "Field 'product' is a primitive type, not a struct. Cannot add nested field 'product.x'."
    );
    // isContainedIn is a substring test: "xproduct.y" contains "product.",
    // so the string field `product` is treated as a nested struct.
    let h = t(
        H2V,
        &[
            ("headers", "id"),
            ("fields", "xproduct.y"),
            ("operation", "copy"),
        ],
    );
    assert_eq!(
        fail(&*h, order_record(vec![])),
        "Only Struct objects supported for [Nested field], found: java.lang.String"
    );
    // An existing field keeps its schema and takes the header's value
    // (buildNewSchema skips a present name, Struct.put overwrites).
    let h = t(
        H2V,
        &[
            ("headers", "id"),
            ("fields", "product"),
            ("operation", "copy"),
        ],
    );
    let out = apply(&*h, order_record(vec![]));
    assert_eq!(out.value_schema.as_deref().map(|s| s.fields.len()), Some(3));
    assert_eq!(
        out.value,
        Value::Struct(vec![Value::Int64(101), s("a6c1"), Value::Int32(7)])
    );
    // A header value that does not fit the existing field's schema.
    let mut wrong = header("w", "");
    wrong.schema = Some(a(Schema::new(Type::Int32)));
    wrong.value = Value::Int32(3);
    let h = t(
        H2V,
        &[
            ("headers", "w"),
            ("fields", "product"),
            ("operation", "copy"),
        ],
    );
    assert_eq!(
        fail(&*h, order_record(vec![wrong])),
        "Invalid Java object for schema with type STRING: class java.lang.Integer for field: \"product\""
    );
}

#[test]
fn header_to_value_refuses_schemaless_headers_and_duplicate_fields() {
    let mut schemaless = header("sl", "v");
    schemaless.schema = None;
    let h = t(
        H2V,
        &[("headers", "sl"), ("fields", "f1"), ("operation", "copy")],
    );
    assert_eq!(
        fail(&*h, order_record(vec![schemaless])),
        "fieldSchema for field f1 cannot be null."
    );
    let h = t(
        H2V,
        &[
            ("headers", "id,h"),
            ("fields", "x,x.y"),
            ("operation", "copy"),
        ],
    );
    assert_eq!(
        fail(&*h, order_record(vec![header("h", "v")])),
        "Cannot create field because of field name duplication x"
    );
}

#[test]
fn header_to_value_caches_the_first_schema_built_for_a_value_schema() {
    let h = t(
        H2V,
        &[
            ("headers", "h1,h2"),
            ("fields", "f1,f2"),
            ("operation", "copy"),
        ],
    );
    let first = apply(
        &*h,
        order_record(vec![header("h1", "a"), header("h2", "b")]),
    );
    // Same value schema, h2 missing: the cached schema still has f2.
    let second = apply(&*h, order_record(vec![header("h1", "c")]));
    assert_eq!(second.value_schema, first.value_schema);
    match &second.value {
        Value::Struct(v) => assert_eq!(v[3..], [s("c"), Value::Null]),
        other => panic!("{other:?}"),
    }
    // A fresh transform whose first record lacks h2 caches a schema
    // without f2; a later record with h2 then fails in Struct.put.
    let h = t(
        H2V,
        &[
            ("headers", "h1,h2"),
            ("fields", "f1,f2"),
            ("operation", "copy"),
        ],
    );
    apply(&*h, order_record(vec![header("h1", "a")]));
    assert_eq!(
        fail(
            &*h,
            order_record(vec![header("h1", "a"), header("h2", "b")])
        ),
        "f2 is not a valid field name"
    );
}

// -------------------------------------------------------- PartitionRouting

const PR: &str = "io.debezium.transforms.partitions.PartitionRouting";

#[test]
fn partition_routing_options_are_validated_as_debezium_does() {
    let required = |k: &str| {
        invalid(
            k,
            "null",
            &format!("The '{k}' value is invalid: A value is required"),
        )
    };
    assert_eq!(
        config_err(PR, &[("partition.topic.num", "2")]),
        required("partition.payload.fields")
    );
    assert_eq!(
        config_err(PR, &[("partition.payload.fields", "a")]),
        required("partition.topic.num")
    );
    assert_eq!(config_err(PR, &[]), required("partition.topic.num"));
    assert_eq!(
        config_err(PR, &[("partition.payload.fields", ",source.table"), ("partition.topic.num", "2")]),
        invalid(
            "partition.payload.fields",
            ",source.table",
            "The 'partition.payload.fields' value is invalid: Empty string element(s) not permitted"
        )
    );
    // Connect's ConfigDef refuses a non-number before configure.
    assert_eq!(
        config_err(
            PR,
            &[
                ("partition.payload.fields", "a"),
                ("partition.topic.num", "x")
            ]
        ),
        invalid("partition.topic.num", "x", "Not a number of type INT")
    );
    // Connect trims " 2", Debezium's isInteger reads the raw text.
    assert_eq!(
        config_err(
            PR,
            &[
                ("partition.payload.fields", "a"),
                ("partition.topic.num", " 2")
            ]
        ),
        invalid(
            "partition.topic.num",
            " 2",
            "The 'partition.topic.num' value is invalid: An integer is expected"
        )
    );
    assert_eq!(
        config_err(PR, &[("partition.payload.fields", "a"), ("partition.topic.num", "0")]),
        invalid(
            "partition.topic.num",
            "0",
            "The 'partition.topic.num' value is invalid: A positive, non-zero integer value is expected"
        )
    );
}

#[test]
fn partition_routing_passes_what_the_router_emits() {
    let p = t(
        PR,
        &[
            ("partition.payload.fields", "after.id"),
            ("partition.topic.num", "4"),
        ],
    );
    assert_eq!(apply(&*p, json_payload()), json_payload());
    assert_eq!(apply(&*p, tombstone()), tombstone());
    // An expanded payload struct is not named *.Envelope either.
    assert_eq!(apply(&*p, order_record(vec![])), order_record(vec![]));
}

#[test]
fn partition_routing_hashes_envelope_fields_as_debezium_tests_expect() {
    let fields = ("partition.payload.fields", "change.id, change.product");
    let java = t(PR, &[fields, ("partition.topic.num", "100")]);
    assert_eq!(
        apply(&*java, envelope("c", Value::Null, orange())).partition,
        Some(39)
    );
    let murmur = t(
        PR,
        &[
            fields,
            ("partition.topic.num", "100"),
            ("partition.hash.function", " MURMUR"),
        ],
    );
    assert_eq!(
        apply(&*murmur, envelope("c", Value::Null, orange())).partition,
        Some(65)
    );
    // An unknown function is java.
    let other = t(
        PR,
        &[
            fields,
            ("partition.topic.num", "100"),
            ("partition.hash.function", "sha"),
        ],
    );
    assert_eq!(
        apply(&*other, envelope("c", Value::Null, orange())).partition,
        Some(39)
    );
}

#[test]
fn partition_routing_hashes_paths_through_change_and_skips_others() {
    // "orange".hashCode() = -1008851410; & MAX % 3 = 1; trimmed path parts.
    let p = t(
        PR,
        &[
            (
                "partition.payload.fields",
                "after.not_existing, change . product",
            ),
            ("partition.topic.num", "3"),
        ],
    );
    assert_eq!(
        apply(&*p, envelope("c", Value::Null, orange())).partition,
        Some(1)
    );
    // `change` is `before` for a delete.
    let p = t(
        PR,
        &[
            ("partition.payload.fields", "change.product"),
            ("partition.topic.num", "3"),
        ],
    );
    assert_eq!(
        apply(&*p, envelope("d", orange(), Value::Null)).partition,
        Some(1)
    );
    // Truncate and message events, and records without the fields, pass.
    assert_eq!(
        apply(&*p, envelope("t", Value::Null, Value::Null)).partition,
        None
    );
    assert_eq!(
        apply(&*p, envelope("M", Value::Null, Value::Null)).partition,
        None
    );
    let p = t(
        PR,
        &[
            ("partition.payload.fields", "after.nope,nope"),
            ("partition.topic.num", "3"),
        ],
    );
    assert_eq!(
        apply(&*p, envelope("c", Value::Null, orange())).partition,
        None
    );
}

#[test]
fn partition_routing_failures_are_unprocessable_messages() {
    // A null `after` is an NPE inside the try: DebeziumException with the
    // envelope's Struct.toString (null fields skipped).
    let p = t(
        PR,
        &[
            ("partition.payload.fields", "after.product"),
            ("partition.topic.num", "2"),
        ],
    );
    assert_eq!(
        fail(&*p, envelope("d", orange(), Value::Null)),
        "Unprocessable message Struct{before=Struct{id=1,price=1.0,product=orange},\
         source=Struct{connector=postgresql,table=products},op=d,ts_ms=5}"
    );
    // "." splits into no part: ArrayIndexOutOfBoundsException.
    let p = t(
        PR,
        &[
            ("partition.payload.fields", "."),
            ("partition.topic.num", "2"),
        ],
    );
    assert!(fail(&*p, envelope("c", Value::Null, orange()))
        .starts_with("Unprocessable message Struct{"));
    // A struct value's hashCode depends on identity hashes.
    let p = t(
        PR,
        &[
            ("partition.payload.fields", "after"),
            ("partition.topic.num", "2"),
        ],
    );
    assert!(fail(&*p, envelope("c", Value::Null, orange())).contains("identity hash codes"));
    // A schema named *.Envelope on a string value: ClassCastException.
    let named = Schema::new(Type::String).named("x.Envelope", None);
    assert!(fail(&*p, routed(Some(named), s("v"))).contains("ClassCastException"));
}

#[test]
fn java_hash_codes_match_the_jdk() {
    let h = |v: Value| test_java_hash(None, &v).expect("hashable");
    assert_eq!(h(Value::Int64(1)), 1);
    assert_eq!(h(Value::Int64(-5_000_000_000)), 705_032_702);
    assert_eq!(h(Value::Float64(1.5)), 1_073_217_536);
    assert_eq!(h(Value::Float32(1.0)), 1_065_353_216);
    assert_eq!(h(Value::Boolean(true)), 1231);
    assert_eq!(h(s("orange")), -1_008_851_410);
    assert_eq!(
        h(Value::Bytes(Bytes::from_static(&[1, 0xff, 0x80, 127]))),
        4_583_940
    );
    assert_eq!(
        h(Value::Array(vec![s("a"), Value::Int32(1), Value::Null])),
        123_039
    );
    assert_eq!(
        h(Value::Map(vec![
            (s("k"), s("v")),
            (s("x"), Value::Int32(3))
        ])),
        152
    );
    let dec = |negative: bool, digits: &str, scale: i32| {
        h(Value::Decimal(Decimal {
            negative,
            digits: digits.into(),
            scale,
        }))
    };
    assert_eq!(dec(false, "0", 0), 0);
    assert_eq!(dec(false, "150", 2), 4652);
    assert_eq!(
        dec(true, "12345678901234567890123456789012345", 5),
        -1_497_695_738
    );
    assert_eq!(dec(false, "12345678901", 0), 463_958_509);
    assert_eq!(dec(true, "7", 0), -217);
    let ts = Schema::new(Type::Int64).named("org.apache.kafka.connect.data.Timestamp", Some(1));
    assert_eq!(
        test_java_hash(Some(&ts), &Value::Int64(1_700_000_000_000)),
        Ok(-807_048_821)
    );
}

#[test]
fn murmur_hashes_match_debeziums_murmur_hash3() {
    let cases: &[(&str, i32)] = &[
        ("", 89_125_410),
        ("a", -1_119_243_492),
        ("orange", -1_471_092_080),
        ("abcdefg", 138_562_689),
        ("abcdefgh", 935_839_100),
        ("abcdefghi", 700_694_511),
        ("abcdefghijklmno", 1_310_993_084),
        ("abcdefghijklmnop", 123_423_003),
        ("abcdefghijklmnopq", -1_899_392_497),
        ("héllo wörld ünïcödé ✓ 😀 x", -729_447_523),
        ("ÿþýüûúùø÷öõôóòñ", 638_731_184),
    ];
    for (text, want) in cases {
        assert_eq!(test_murmur(text.as_bytes()), *want, "{text}");
    }
    // Other objects: MurmurHash3.hash(o.hashCode()).
    for (i, want) in [
        (0, 1_805_505_889),
        (1, -1_931_162_451),
        (-1, 171_705_313),
        (42, -1_311_320_038),
        (i32::MIN, -797_218_156),
    ] {
        assert_eq!(test_murmur(&i32::to_le_bytes(i)), want, "{i}");
    }
    // A ByteBuffer is not a byte[]: hashed through its hashCode 4583940.
    assert_eq!(test_murmur(&4_583_940i32.to_le_bytes()), 2_014_629_579);
}

// ------------------------------------------------------- EnforceRecordSize

const ERS: &str = "io.debezium.transforms.EnforceRecordSize";

#[test]
fn enforce_record_size_options_are_parsed_as_kafka_does() {
    assert_eq!(
        config_err(ERS, &[]),
        TransformConfigError::Missing {
            key: "max.bytes".to_owned()
        }
    );
    assert_eq!(
        config_err(ERS, &[("max.bytes", "x")]),
        invalid("max.bytes", "x", "Not a number of type INT")
    );
    assert_eq!(
        config_err(ERS, &[("max.bytes", " 0 ")]),
        invalid("max.bytes", "0", "Must be a positive integer")
    );
    assert_eq!(
        config_err(ERS, &[("max.bytes", "1"), ("compression.ratio", "0")]),
        invalid("compression.ratio", "0.0", "Must be a positive number")
    );
    assert_eq!(
        config_err(ERS, &[("max.bytes", "1"), ("compression.ratio", "half")]),
        invalid("compression.ratio", "half", "Not a number of type DOUBLE")
    );
    assert_eq!(
        config_err(ERS, &[("max.bytes", "1"), ("min.field.size", "-1")]),
        invalid("min.field.size", "-1", "Must be non-negative")
    );
    assert!(configured(ERS, &[("max.bytes", "1"), ("compression.ratio", " 1.5d ")]).is_ok());
    assert!(configured(ERS, &[("max.bytes", "1"), ("compression.ratio", "1e-1")]).is_ok());
}

/// An envelope on topic `t` with a null key and no headers:
/// `before`/`after` are `{id INT64, s STRING}`, `op` a string.
fn sized(before: Value, after: Value) -> ConnectRecord {
    let row = structure(
        None,
        vec![
            ("id", Schema::new(Type::Int64)),
            ("s", Schema::optional(Type::String)),
        ],
    )
    .with_optional(true);
    let schema = structure(
        Some("t.Envelope"),
        vec![
            ("before", row.clone()),
            ("after", row),
            ("op", Schema::new(Type::String)),
        ],
    );
    ConnectRecord {
        topic: Arc::from("t"),
        partition: None,
        key_schema: None,
        key: Value::Null,
        value_schema: Some(a(schema)),
        value: Value::Struct(vec![before, after, s("c")]),
        timestamp: None,
        headers: Vec::new(),
    }
}

/// A row `(id, s)`.
fn row(id: i64, text: &str) -> Value {
    Value::Struct(vec![Value::Int64(id), s(text)])
}

#[test]
fn enforce_record_size_estimates_as_the_approximate_calculator() {
    // 700 (1 partition + 6 offset entries) + 8 (timestamp) + 1 (topic)
    // + value 56 + (8 + 0) + (8 + 56 + (8 + 24) + (8 + 56 + 100)) + (8 + 56 + 1) = 1098.
    let r = || sized(Value::Null, row(1, &"x".repeat(100)));
    let at = t(ERS, &[("max.bytes", "1098"), ("min.field.size", "10")]);
    assert_eq!(apply(&*at, r()), r());
    let over = t(ERS, &[("max.bytes", "1048"), ("min.field.size", "10")]);
    assert_eq!(
        apply(&*over, r()),
        sized(Value::Null, row(1, &"x".repeat(50)))
    );
    // compression.ratio 0.5: ceil(549) fits.
    let half = t(
        ERS,
        &[
            ("max.bytes", "1048"),
            ("min.field.size", "10"),
            ("compression.ratio", "0.5"),
        ],
    );
    assert_eq!(apply(&*half, r()), r());
    // A field at min.field.size is never truncated.
    let min = t(ERS, &[("max.bytes", "1048"), ("min.field.size", "100")]);
    assert_eq!(apply(&*min, r()), r());
    // Each header counts 100: 1098 + 100 is over 1100 by 98.
    let mut with_header = r();
    with_header.headers.push(header("id", "x"));
    let out = apply(
        &*t(ERS, &[("max.bytes", "1100"), ("min.field.size", "10")]),
        with_header,
    );
    assert_eq!(out.value, sized(Value::Null, row(1, &"x".repeat(2))).value);
}

#[test]
fn enforce_record_size_truncates_proportionally() {
    // before 252, after 452: 1550 in all; 1449 leaves an excess of 101,
    // split ceil(100/400*101) = 26 and ceil(300/400*101) = 76.
    let r = || sized(row(1, &"b".repeat(100)), row(2, &"a".repeat(300)));
    let ers = t(ERS, &[("max.bytes", "1449"), ("min.field.size", "10")]);
    assert_eq!(
        apply(&*ers, r()),
        sized(row(1, &"b".repeat(74)), row(2, &"a".repeat(224)))
    );
    assert_eq!(
        apply(
            &*t(ERS, &[("max.bytes", "1550"), ("min.field.size", "10")]),
            r()
        ),
        r()
    );
}

#[test]
fn enforce_record_size_after_the_router() {
    let ers = t(ERS, &[("max.bytes", "1")]);
    // Not a Struct value: unchanged, however large.
    assert_eq!(apply(&*ers, json_payload()), json_payload());
    assert_eq!(apply(&*ers, tombstone()), tombstone());
    // A Struct value with the router's string key: `(Struct) key` fails.
    assert_eq!(
        fail(&*ers, order_record(vec![])),
        "class java.lang.String cannot be cast to class org.apache.kafka.connect.data.Struct \
         (Kafka Connect fails with a ClassCastException here)"
    );
    // A Struct value without before/after: measured, nothing to truncate.
    let mut r = order_record(vec![]);
    r.key = Value::Null;
    assert_eq!(apply(&*ers, r.clone()), r);
}

#[test]
fn enforce_record_size_bytes_decimals_and_surrogates() {
    let dec = Schema::new(Type::Bytes)
        .named(crate::connect::DECIMAL_NAME, Some(1))
        .with_parameter("scale", "0");
    let row_schema = structure(None, vec![("b", Schema::new(Type::Bytes)), ("d", dec)]);
    let schema = structure(Some("t.Envelope"), vec![("after", row_schema)]);
    let value = |d: Value| {
        Value::Struct(vec![Value::Struct(vec![
            Value::Bytes(Bytes::from(vec![7u8; 40])),
            d,
        ])])
    };
    let mut r = sized(Value::Null, Value::Null);
    r.value_schema = Some(a(schema));
    r.value = value(Value::Null);
    // 709 + 56 + 8 + (56 + 8 + 24 + 40 + 8 + 0) = 909; excess 9 cuts 40 → 31.
    let ers = t(ERS, &[("max.bytes", "900"), ("min.field.size", "10")]);
    match apply(&*ers, r.clone()).value {
        Value::Struct(v) => assert_eq!(
            v[0],
            Value::Struct(vec![Value::Bytes(Bytes::from(vec![7u8; 31])), Value::Null])
        ),
        other => panic!("{other:?}"),
    }
    // findTruncatableFields casts every BYTES value to ByteBuffer.
    r.value = value(Value::Decimal(Decimal {
        negative: false,
        digits: "5".into(),
        scale: 0,
    }));
    assert_eq!(
        fail(&*ers, r),
        "class java.math.BigDecimal cannot be cast to class java.nio.ByteBuffer (Kafka Connect \
         fails with a ClassCastException here)"
    );
    // Cutting between the halves of a surrogate pair is refused.
    let text = format!("{}😀", "x".repeat(20));
    let r = sized(Value::Null, row(1, &text));
    // 1022 in all (24 UTF-8 bytes), 22 UTF-16 units: one to remove.
    let ers = t(ERS, &[("max.bytes", "1021"), ("min.field.size", "10")]);
    assert!(fail(&*ers, r).contains("surrogate"));
}

// ----------------------------------------------------- ActivateTracingSpan

const ATS: &str = "io.debezium.transforms.tracing.ActivateTracingSpan";

/// A traced-row envelope: `after` has `tracingspancontext` of `schema`.
fn traced(context_schema: Schema, context: Value) -> ConnectRecord {
    let after = structure(
        None,
        vec![
            ("id", Schema::new(Type::Int32)),
            ("tracingspancontext", context_schema),
        ],
    )
    .with_optional(true);
    let schema = structure(
        Some("p.public.outbox.Envelope"),
        vec![("after", after), ("op", Schema::new(Type::String))],
    );
    routed(
        Some(schema),
        Value::Struct(vec![Value::Struct(vec![Value::Int32(1), context]), s("c")]),
    )
}

#[test]
fn activate_tracing_span_options() {
    assert_eq!(
        config_err(ATS, &[("tracing.with.context.field.only", "yes")]),
        invalid(
            "tracing.with.context.field.only",
            "yes",
            "Expected value to be either true or false"
        )
    );
    assert!(configured(
        ATS,
        &[
            ("tracing.operation.name", "x"),
            ("tracing.span.context.field", "c")
        ]
    )
    .is_ok());
}

#[test]
fn activate_tracing_span_without_opentelemetry() {
    let ats = t(ATS, &[]);
    // Everything the router emits is passed: not a *.Envelope schema.
    assert_eq!(apply(&*ats, json_payload()), json_payload());
    assert_eq!(apply(&*ats, tombstone()), tombstone());
    assert_eq!(apply(&*ats, order_record(vec![])), order_record(vec![]));
    // An envelope would be traced: TracingSpanUtil cannot load.
    let ctx = || {
        traced(
            Schema::optional(Type::String),
            s("traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        )
    };
    let msg = "Failed to record tracing information, tracing libraries not available";
    assert_eq!(fail(&*ats, ctx()), msg);
    let only = t(ATS, &[("tracing.with.context.field.only", "true")]);
    assert_eq!(fail(&*only, ctx()), msg);
    // Without a context, with.context.field.only passes the record.
    let none = || traced(Schema::optional(Type::String), Value::Null);
    assert_eq!(apply(&*only, none()), none());
    assert_eq!(fail(&*ats, none()), msg);
    // Another field name: this record has none.
    let other = t(
        ATS,
        &[
            ("tracing.with.context.field.only", "true"),
            ("tracing.span.context.field", "ctx"),
        ],
    );
    assert_eq!(apply(&*other, ctx()), ctx());
    // getString's type check.
    let wrong = traced(Schema::optional(Type::Int32), Value::Int32(1));
    assert_eq!(
        fail(&*only, wrong),
        "Field 'tracingspancontext' is not of type STRING"
    );
    // getStruct's type check on `after`.
    let schema = structure(
        Some("x.Envelope"),
        vec![("after", Schema::new(Type::String))],
    );
    assert_eq!(
        fail(&*ats, routed(Some(schema), Value::Struct(vec![s("a")]))),
        "Field 'after' is not of type STRUCT"
    );
}
