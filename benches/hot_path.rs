//! Per-event cost of walrelay's hot path, without PostgreSQL or Kafka:
//! pgoutput decode (the Insert message alone and the whole XLogData frame),
//! EventRouter routing (StringConverter, and JsonConverter with schemas) and
//! the producer record build (librdkafka headers + `BaseRecord`, as
//! `sink::KafkaSink::run` does it), plus all three in a row.
//!
//! Every benchmark handles one outbox event per iteration and reports
//! elements per second, so `time` reads as ns/event. The event is the row
//! `benches/run.sh` writes: a uuid id, `Order`, `order-<n>`, `OrderCreated`
//! and a jsonb payload of about 300 bytes.
//!
//! Run: `cargo bench --bench hot_path` (add `-- route` to filter). It must
//! never touch the network or the file system beyond criterion's reports.

#![allow(missing_docs, reason = "criterion_main! writes an undocumented main")]

use std::hint::black_box;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use walrelay::connect::config::{ConverterKind, ConvertersConfig};
use walrelay::connect::pg::oid;
use walrelay::router::DebeziumConfig;
use walrelay::router::{
    BoundRelation, ColumnMeta, EventMeta, KafkaRecord, Router, RouterConfig, TableMeta,
};
use walrelay_proto::frame::{decode_replication_message, ReplicationMessage};
use walrelay_proto::pgoutput::{decode_message, ColumnValue, LogicalMessage, TupleData};
use walrelay_proto::{Lsn, RelationColumnInfo, RelationInfo};

/// Relation OID of the benchmark's outbox table.
const REL_ID: u32 = 16_384;

/// The outbox table as a Relation message would describe it.
fn relation() -> Arc<RelationInfo> {
    let col = |name: &str, type_oid: u32| RelationColumnInfo {
        name: name.to_owned(),
        type_oid,
        type_modifier: -1,
        is_key: name == "id",
    };
    Arc::new(RelationInfo {
        id: REL_ID,
        namespace: "public".to_owned(),
        name: "outbox".to_owned(),
        replica_identity: b'd',
        columns: vec![
            col("id", oid::UUID),
            col("aggregatetype", oid::VARCHAR),
            col("aggregateid", oid::VARCHAR),
            col("type", oid::VARCHAR),
            col("payload", oid::JSONB),
        ],
    })
}

/// Catalog facts of the benchmark table: every column but the payload NOT NULL.
fn table_meta() -> TableMeta {
    let col = |name: &str, not_null: bool, type_name: &str| ColumnMeta {
        name: name.to_owned(),
        not_null,
        type_name: Some(type_name.to_owned()),
        default_expr: None,
    };
    TableMeta::new(vec![
        col("id", true, "uuid"),
        col("aggregatetype", true, "character varying(255)"),
        col("aggregateid", true, "character varying(255)"),
        col("type", true, "character varying(255)"),
        col("payload", false, "jsonb"),
    ])
}

/// The column texts of one event, as PostgreSQL's output functions write them.
fn event_texts() -> [String; 5] {
    let payload = format!(
        "{{\"note\": \"{}\", \"orderId\": 123456, \"customer\": \"customer-456\", \"currency\": \"EUR\", \"total\": 1999}}",
        "x".repeat(200)
    );
    [
        "0b7a6a3e-51d7-4c4e-9a3f-3f0e3c1b2d4a".to_owned(),
        "Order".to_owned(),
        "order-456".to_owned(),
        "OrderCreated".to_owned(),
        payload,
    ]
}

/// The pgoutput Insert message (`I`, relation, `N`, text columns) of one event.
fn insert_message() -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_u8(b'I');
    buf.put_u32(REL_ID);
    buf.put_u8(b'N');
    let texts = event_texts();
    buf.put_u16(texts.len() as u16);
    for t in &texts {
        buf.put_u8(b't');
        buf.put_u32(t.len() as u32);
        buf.put_slice(t.as_bytes());
    }
    buf.freeze()
}

/// The XLogData frame (`w`, wal start, wal end, send time, message) around it.
fn xlogdata_frame() -> Bytes {
    let msg = insert_message();
    let mut buf = BytesMut::with_capacity(25 + msg.len());
    buf.put_u8(b'w');
    buf.put_u64(0x16_B374_D848);
    buf.put_u64(0x16_B374_D900);
    buf.put_i64(817_000_000_000_000);
    buf.put_slice(&msg);
    buf.freeze()
}

/// The decoded row of one event.
fn event_row() -> TupleData {
    TupleData {
        columns: event_texts()
            .iter()
            .map(|t| ColumnValue::Text(Bytes::copy_from_slice(t.as_bytes())))
            .collect(),
    }
}

fn event_meta() -> EventMeta {
    EventMeta {
        lsn: Lsn(0x16_B374_D848),
        commit_lsn: Lsn(0x16_B374_D900),
        xid: 4242,
        commit_time_us: 1_764_000_000_000_000,
        received_us: 0,
        last_commit_lsn: None,
    }
}

/// A router and the outbox binding for `converters`, EventRouter defaults.
fn router(converters: ConvertersConfig) -> (Router, BoundRelation) {
    let router = Router::new(
        RouterConfig::default(),
        converters,
        DebeziumConfig::default(),
    )
    .expect("default router config is valid");
    let bound = router
        .bind(&relation(), &table_meta())
        .expect("benchmark table has the outbox columns");
    (router, bound)
}

/// A typical chain after the router: the topic renamed, a header added,
/// the payload wrapped in a struct.
fn chain3() -> walrelay::connect::transforms::Chain {
    use walrelay::connect::transforms::config::{build, OptionValue, TransformSpec};
    let spec = |name: &str, class: &str, opts: &[(&str, &str)]| TransformSpec {
        name: name.to_owned(),
        class: class.to_owned(),
        predicate: None,
        negate: None,
        options: opts
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OptionValue::Text((*v).to_owned())))
            .collect(),
    };
    build(
        &[
            spec(
                "rename",
                "RegexRouter",
                &[
                    ("regex", "outbox\\.event\\.(.*)"),
                    ("replacement", "events.$1"),
                ],
            ),
            spec(
                "tag",
                "InsertHeader",
                &[("header", "origin"), ("value.literal", "walrelay")],
            ),
            spec("wrap", "HoistField$Value", &[("field", "event")]),
        ],
        &[],
    )
    .expect("valid chain")
    .0
}

fn json_converters() -> ConvertersConfig {
    ConvertersConfig {
        key: ConverterKind::Json,
        key_schemas_enable: true,
        value: ConverterKind::Json,
        value_schemas_enable: true,
        ..ConvertersConfig::default()
    }
}

/// What `KafkaSink::run` hands librdkafka for one record, minus the send.
fn encode(record: &KafkaRecord, opaque: usize) -> usize {
    let wire = walrelay::sink::broker::WireRecord::of(record);
    let base = walrelay::sink::kafka::base_record(&wire, opaque);
    black_box(&base);
    base.delivery_opaque
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(1));
    let msg = insert_message();
    g.bench_function("insert", |b| {
        b.iter(|| decode_message(black_box(msg.clone()), 1, false).expect("valid insert"));
    });
    let frame = xlogdata_frame();
    g.bench_function("frame", |b| {
        b.iter(|| {
            let ReplicationMessage::XLogData(x) =
                decode_replication_message(black_box(frame.clone())).expect("valid frame")
            else {
                unreachable!("the frame is an XLogData");
            };
            decode_message(x.data, 1, false).expect("valid insert")
        });
    });
    g.finish();
}

fn route(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");
    g.throughput(Throughput::Elements(1));
    let row = event_row();
    let meta = event_meta();
    let (mut string_router, string_bound) = router(ConvertersConfig::default());
    g.bench_function("string_converter", |b| {
        b.iter(|| {
            string_router
                .route(&string_bound, black_box(&row), &meta)
                .expect("routes")
        });
    });
    let (mut json_router, json_bound) = router(json_converters());
    g.bench_function("json_converter_schemas", |b| {
        b.iter(|| {
            json_router
                .route(&json_bound, black_box(&row), &meta)
                .expect("routes")
        });
    });
    // The same routers with three transforms after them (issue 31).
    for (name, converters) in [
        ("string_converter_chain3", ConvertersConfig::default()),
        ("json_converter_schemas_chain3", json_converters()),
    ] {
        let (r, bound) = router(converters);
        let mut r = r.with_chain(chain3());
        g.bench_function(name, |b| {
            b.iter(|| r.route(&bound, black_box(&row), &meta).expect("routes"));
        });
    }
    g.finish();
}

fn encode_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(1));
    let (mut r, bound) = router(ConvertersConfig::default());
    let record = r
        .route(&bound, &event_row(), &event_meta())
        .expect("routes")
        .expect("not dropped");
    g.bench_function("record", |b| b.iter(|| encode(black_box(&record), 7)));
    g.finish();
}

fn pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(1));
    let frame = xlogdata_frame();
    let meta = event_meta();
    let (mut r, bound) = router(ConvertersConfig::default());
    g.bench_function("frame_route_encode", |b| {
        b.iter(|| {
            let ReplicationMessage::XLogData(x) =
                decode_replication_message(black_box(frame.clone())).expect("valid frame")
            else {
                unreachable!("the frame is an XLogData");
            };
            let LogicalMessage::Insert(ins) = decode_message(x.data, 1, false).expect("valid")
            else {
                unreachable!("the message is an Insert");
            };
            let record = r
                .route(&bound, &ins.new, &meta)
                .expect("routes")
                .expect("not dropped");
            encode(&record, 7)
        });
    });
    g.finish();
}

criterion_group!(benches, decode, route, encode_bench, pipeline);
criterion_main!(benches);
