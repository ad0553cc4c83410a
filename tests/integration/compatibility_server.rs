//! The side-by-side suite for Debezium Server's sinks other than Kafka: the
//! real Debezium Server 3.6.1.Final (`scripts/debezium-server.sh`) and
//! walrelay (`walrelay run --config application.properties`) run from the
//! same `application.properties` against the same database, each
//! publishing to a broker server of its own of the same kind
//! ([`Server::nats`], [`Server::redis`], a [`Capture`] HTTP server, a moto
//! server for SQS, Kinesis and SNS: [`Server::moto`]) or to a virtual host of
//! its own on one RabbitMQ server ([`Server::rabbitmq`]; for
//! `rabbitmqstream` one with the stream plugin, [`Server::rabbitmq_stream`]),
//! fed the same transactions; then every message is compared per
//! destination (NATS subject, Redis stream, AMQP exchange, RabbitMQ
//! stream, HTTP request line, SQS queue, Kinesis stream, the queue
//! subscribed to an SNS topic), in order: key (a
//! Kinesis record's partition key), value bytes, header names, header
//! order, header values, and the attributes a broker adds ([`Msg::attrs`]: the routing key, every
//! AMQP property and each header value's AMQP type; a stream message's
//! properties, header, annotations, offset and each application property's
//! AMQP type; the HTTP client's own headers and the header names' case as
//! sent; each SQS message attribute's data type, and on a FIFO queue the
//! message group and deduplication ids; the same for SNS, as the subscribed
//! queue gets them), and for NATS the header lines as
//! they went over the wire. The stream `create-stream` makes is compared
//! too.
//!
//! The two files differ only in `slot.name`/`publication.name` (one slot
//! each on the same database: both decode the same transactions) and the
//! broker's address (`@SERVER@`; for RabbitMQ also `@PORT@` and `@VHOST@`,
//! for SQS `@QUEUE_URL@`, for SNS `@TOPIC_ARN@`). `debezium-server.sh run`
//! adds an offsets file, a
//! loopback HTTP port and plain-text logs to Debezium's copy; none of them
//! reaches a message.
//!
//! Not compared, because it cannot be equal:
//! - the value of `__debezium.context.runId` (a header; the extended Redis
//!   field `__DEBEZIUM.CONTEXT.RUNID`): a fresh UUID per task start, so it
//!   is compared with the UUID masked ([`mask_uuid`]);
//! - Redis entry ids (the server's clock) and NATS stream sequences and
//!   times: only the order within a destination is compared;
//! - walrelay's `Nats-Msg-Id`, an intended addition (the event id, so that
//!   JetStream's duplicate window drops a republished event): it is checked
//!   to be the event id of Debezium's `id` header, then taken out;
//! - the HTTP `Host` header's port (each relay has its receiver);
//! - the order of AMQP headers: lapin reads a table into a sorted map;
//! - SQS's message ids, receipt handles, MD5s, timestamps and receive
//!   counts (the server's; on SNS runs those of the subscribed queue, the
//!   topic's message id never shows), and a FIFO message's
//!   `SequenceNumber`: moto
//!   gives one, random, only where the sender sent a deduplication id
//!   (walrelay does, Debezium Server does not);
//! - Kinesis sequence numbers and arrival times (the server's): only the
//!   order within a stream is compared.
//!
//! Layout. A [`Run`] is one start of each relay: a directory under
//! `tests/compat/server/` holding its `application.properties`
//! (placeholders `@PGPORT@`, `@DB@`, `@SLOT@`, `@SERVER@`), plus its
//! [`Case`]s. Debezium Server runs one connector, one transform chain and
//! one format per process, and walrelay one EventRouter per file, so cases
//! that need other settings of those need a run of their own, while cases
//! that share them share a run: one outbox table each (or the
//! logical-message outbox), whose aggregate type is the case's name, so each
//! case has its own destination `outbox.event.<case>`. SQL files
//! (`@TABLE@`: the case's table) are shared between cases. Each run gets a
//! database of its own, created for it and dropped with its slots
//! afterwards: no other test's logical decoding message reaches it (at the
//! EventRouter's defaults Debezium publishes such a message to
//! `dbzs.message`, which no NATS stream captures, and exits).
//!
//! Each run's feed is written once both relays stream; the suite waits until
//! Debezium has published what its cases expect (and walrelay as much, or
//! gave up), then a second. A run may end with a fatal step: a record that
//! stops Debezium Server, written after the rest arrived, so what happened to
//! that record alone shows. A walrelay that refuses its file exits before
//! streaming: a `stop` difference (`rabbitmq-key-bytes`), the run going on
//! with Debezium Server alone.
//!
//! RabbitMQ: Debezium Server never declares an exchange, so each virtual
//! host gets a durable fanout exchange per case (`outbox.event.<case>`)
//! bound to a queue of the same name, read with `basic.get` (what was read
//! is kept: a message is taken once). RabbitMQ streams: each relay creates
//! its streams (`outbox.event.<case>`: the topic) in its virtual host; they
//! are read from the first offset with rabbitmq-stream-client, the
//! message-id as the key, the application properties as the headers (a
//! map: in name order). HTTP: the [`Capture`] server keeps
//! each request as it came over the wire and answers 200; the JDK client's
//! h2c upgrade offer is not taken.
//!
//! SQS: Debezium Server sends every record to `queue.url` (`SendMessage`,
//! the value as the body, no attributes), so each relay's moto server
//! holds one queue ([`SQS_QUEUE`], created before the relays start) and
//! all the run's cases land in it: the queue is compared as a whole, in
//! the order received (moto hands messages in the order stored; the feed
//! is one psql script, so both relays see one commit order). Each message:
//! the body's bytes, the message attributes (none from either relay) with
//! their data types, and on a FIFO queue `MessageGroupId` and
//! `MessageDeduplicationId` (the body's SHA-256 shown as `sha256(body)`,
//! UUIDs masked). While waiting, the queue's counters are read instead of
//! the messages: a message taken off a FIFO queue no longer deduplicates
//! a later one, so the final read alone takes them. Debezium Server's FIFO
//! queue has content-based deduplication (it sends no deduplication id,
//! which a FIFO queue without it refuses, and Debezium Server stops).
//! walrelay's FIFO message group (the record key) and deduplication id
//! (the event id) differ on purpose: known differences. Both relays get
//! the test keys in their environment ([`AWS_ENV`]): the SDKs' default
//! chain finds them there, and nothing reaches beyond loopback.
//!
//! Kinesis: Debezium Server puts each record into the stream named by its
//! destination (`PutRecords`; the value as the data, the serialised key as
//! the partition key) and creates no stream, so each relay's moto server
//! gets a stream of one shard per case (`outbox.event.<case>`) before the
//! relays start: one shard keeps a stream in one order. Every record is
//! read from `TRIM_HORIZON`, shard by shard; reading takes nothing, so the
//! waiting reads too. Each record: the partition key (as the key, byte
//! for byte) and the data; no headers. Debezium Server's Java SDK speaks
//! CBOR to Kinesis, which moto cannot read: it starts with
//! `JAVA_TOOL_OPTIONS=-Daws.cborEnabled=false` ([`KINESIS_JAVA_OPTIONS`]),
//! which leaves `debezium-server.sh`'s options and so its AOT cache as
//! they are. moto refuses a whole `PutRecords` for a partition key over
//! 256 characters after storing the records before it, so no feed has one.
//!
//! SNS: Debezium Server publishes every record to `topic.arn`
//! (`PublishBatch`; the value before the converters as the message, every
//! header a String attribute), so each relay's moto server holds one topic
//! ([`SQS_QUEUE`]; on a FIFO run `.fifo` with content-based deduplication,
//! since Debezium Server sends no deduplication id) and a queue of the same
//! name subscribed to it with `RawMessageDelivery` (moto's envelope of a
//! non-raw delivery is its own format), both created before the relays
//! start; `@TOPIC_ARN@` is the topic's ARN. The queue is read as on an SQS
//! run: the message as the value, every attribute a header with its data
//! type, the FIFO ids as `sns MessageGroupId` and
//! `sns MessageDeduplicationId`. Known differences: walrelay's
//! deduplication id (the event id), its hashed group for a key SNS does
//! not allow, and a NULL payload, which Debezium Server publishes as an
//! empty message (moto takes it, SNS does not) while walrelay refuses the
//! null value and stops: its case (`null-payload`) is last and alone, as a
//! refused entry does not stop the rest of its `PublishBatch`.
//!
//! Pub/Sub: Debezium Server publishes each record to the topic named by its
//! destination in `project.id` and creates none, so each relay's emulator
//! ([`Server::pubsub`], Google's pstest) gets a topic per case
//! (`outbox.event.<case>`) and an ordered subscription on it before the
//! relays start; `@SERVER@` is `host:port` (`debezium.sink.pubsub.address`).
//! A message: the ordering key as the key, the data as the value, the
//! attributes as the headers (a map: in name order). Neither relay orders
//! messages of different ordering keys (each key's requests go on their
//! own), so each destination is compared key by key, in stored order (the
//! emulator's message ids).
//!
//! Pulsar: one standalone per run ([`PulsarServer`]), a namespace per relay
//! (`public/dbz`, `public/walrelay`: `@VHOST@`); topics are created as
//! first published to and read from their first message (reading takes
//! nothing). A message: the message key as the key, the payload as the
//! value, the properties as the headers (a map: in name order), the schema
//! version (both declare STRING) and the null-value mark as attributes;
//! producer names, sequence ids and publish times are the broker's.
//!
//! Another sink: a [`Sink`] variant (how to start servers of its kind as
//! [`BrokerServer`]s, its address as `@SERVER@`, every message read back
//! as [`Msg`]s by destination: key, value, headers in order, attributes),
//! its runs in [`RUNS`] with their directories, and its known differences.
//!
//! Differences walrelay is known to have are in [`KNOWN_DIFFERENCES`], as in
//! `compatibility`: any other difference fails, and an entry whose
//! difference no longer shows fails too (remove it then), unless it is
//! marked intermittent. A header order that differs is a `header order`
//! difference of its own, printed apart at the end: Debezium Server's is a
//! Java `HashMap`'s. walrelay's Redis extended fields and NATS header
//! blocks follow it, and NATS header lines are compared byte for byte.
//!
//! Cost: one Debezium Server start per run, two runs at a time, each run
//! 10-30 s on 2 cores with `debezium-server.sh`'s AOT cache
//! (`.cache/debezium-server/aot/`); a RabbitMQ run also boots one
//! rabbitmq-server (6-8 s); the five AWS runs (moto starts in about half a
//! second) take about 40 s together; the Pub/Sub run about 25 s, the
//! Pulsar run (its standalone starts in about 4 s) about 26 s. Without the
//! AOT cache the first start trains it (slower, and its stop writes 75 MB),
//! so the first run goes alone and the others use it.
//!
//! Environment: `scripts/env.sh up` (the shared PostgreSQL), nats-server
//! and moto (`scripts/brokers.sh fetch nats`, `fetch moto`), Debian's
//! redis-server and rabbitmq-server, `scripts/debezium-server.sh fetch`;
//! `scripts/test.sh` does all three. Then
//! `cargo test --test integration compatibility_server::`.
//! `WALRELAY_COMPAT_SERVER_RUNS=a,b` runs only those runs,
//! `WALRELAY_COMPAT_PARALLEL` sets how many run at once (default 2),
//! `WALRELAY_COMPAT_KEEP=1` keeps every run's files and logs.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use futures_util::StreamExt;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties, ExchangeKind};
use rabbitmq_stream_client::types::{Message as StreamMessage, OffsetSpecification, SimpleValue};
use rabbitmq_stream_client::Environment;

use crate::brokers::{parse_xrange, Server};
use crate::brokers_aws::{kinesis_client, sns_client, sqs_client};
use crate::brokers_pubsub::PubSubClients;
use crate::brokers_pulsar::{read_full, PulsarServer};
use crate::common::{env, unique_name};
use crate::compatibility::{
    file_text, mask_uuid, psql_c, psql_in, show, strip_ansi, substitute, tail, Diff, Known,
};

/// The header whose value is a fresh UUID per task start.
const RUN_ID: &str = "__debezium.context.runId";
/// walrelay's deduplication header on NATS (an intended addition).
const NATS_MSG_ID: &str = "Nats-Msg-Id";

/// A broker Debezium Server publishes to: each relay gets a server of its
/// own of this kind (RabbitMQ: a virtual host of its own on one server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sink {
    /// `debezium.sink.type=nats-jetstream`.
    NatsJetStream,
    /// `debezium.sink.type=redis`.
    Redis,
    /// `debezium.sink.type=rabbitmq` (AMQP 0-9-1).
    RabbitMq,
    /// `debezium.sink.type=http`.
    Http,
    /// `debezium.sink.type=rabbitmqstream` (the stream protocol).
    RabbitMqStream,
    /// `debezium.sink.type=sqs`: a moto server per relay holding one queue
    /// ([`SQS_QUEUE`], `.fifo` and content-based deduplication when
    /// `fifo`), every case's messages in it.
    Sqs { fifo: bool },
    /// `debezium.sink.type=kinesis`: a moto server per relay holding a
    /// stream of one shard per case (`outbox.event.<case>`).
    Kinesis,
    /// `debezium.sink.type=sns`: a moto server per relay holding one topic
    /// ([`SQS_QUEUE`], `.fifo` and content-based deduplication when
    /// `fifo`) and a queue of the same name subscribed to it by raw
    /// delivery, every case's messages in it.
    Sns { fifo: bool },
    /// `debezium.sink.type=pubsub`: a Pub/Sub emulator (pstest) per relay
    /// holding a topic per case (`outbox.event.<case>`) and an ordered
    /// subscription on it.
    PubSub,
    /// `debezium.sink.type=pulsar`: one Pulsar standalone, a namespace per
    /// relay (`public/<@VHOST@>`).
    Pulsar,
}

/// RabbitMQ: the virtual host each relay publishes to on the run's one
/// server (Debezium Server's first).
const VHOSTS: [&str; 2] = ["/", "walrelay"];

impl Sink {
    /// The broker servers of a run, Debezium Server's first. RabbitMQ: one
    /// server, a virtual host each, in each a fanout exchange per case
    /// (`outbox.event.<case>`: Debezium Server never declares one) bound
    /// to a queue of the same name.
    async fn servers(self, run: &Run) -> Result<(BrokerServer, BrokerServer), String> {
        let blocking = |f: fn() -> Server| async move {
            tokio::task::spawn_blocking(f)
                .await
                .map_err(|e| format!("broker server: {e}"))
        };
        match self {
            Sink::NatsJetStream | Sink::Redis => {
                let start = if self == Sink::Redis {
                    Server::redis
                } else {
                    Server::nats
                };
                let (a, b) = (blocking(start).await?, blocking(start).await?);
                Ok((BrokerServer::of(a), BrokerServer::of(b)))
            }
            Sink::RabbitMq => {
                let server = blocking(Server::rabbitmq).await?;
                let server = tokio::task::spawn_blocking(move || {
                    // The AMQP listener opens before the broker's boot ends.
                    walrelay_vhost(&server)?;
                    Ok::<_, String>(server)
                })
                .await
                .map_err(|e| format!("rabbitmqctl: {e}"))??;
                let queues: Vec<String> = run
                    .cases
                    .iter()
                    .map(|c| format!("outbox.event.{}", c.name))
                    .collect();
                let port = server.port;
                let running: Arc<dyn std::any::Any + Send + Sync> = Arc::new(server);
                let mut pair = Vec::new();
                for vhost in VHOSTS {
                    declare_amqp(port, vhost, &queues, run.exchange).await?;
                    pair.push(BrokerServer {
                        vhost: vhost.to_owned(),
                        amqp: Some(AmqpQueues {
                            queues: queues.clone(),
                            got: tokio::sync::Mutex::default(),
                        }),
                        ..BrokerServer::shared(port, Arc::clone(&running))
                    });
                }
                let wr = pair.pop().expect("two virtual hosts");
                Ok((pair.pop().expect("two virtual hosts"), wr))
            }
            Sink::Http => {
                let (a, b) = (Capture::start().await?, Capture::start().await?);
                Ok((BrokerServer::http(a), BrokerServer::http(b)))
            }
            Sink::RabbitMqStream => {
                let (server, stream) = tokio::task::spawn_blocking(move || {
                    let (server, stream) = Server::rabbitmq_stream();
                    walrelay_vhost(&server)?;
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while std::net::TcpStream::connect(("127.0.0.1", stream)).is_err() {
                        if Instant::now() > deadline {
                            return Err("the stream port did not listen".to_owned());
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Ok::<_, String>((server, stream))
                })
                .await
                .map_err(|e| format!("rabbitmq-server: {e}"))??;
                let streams: Vec<String> = run
                    .cases
                    .iter()
                    .map(|c| format!("outbox.event.{}", c.name))
                    .collect();
                let running: Arc<dyn std::any::Any + Send + Sync> = Arc::new(server);
                let pair = VHOSTS.map(|vhost| BrokerServer {
                    vhost: vhost.to_owned(),
                    streams: streams.clone(),
                    ..BrokerServer::shared(stream, Arc::clone(&running))
                });
                let [dbz, wr] = pair;
                Ok((dbz, wr))
            }
            Sink::Sqs { fifo } => {
                let (a, b) = (blocking(Server::moto).await?, blocking(Server::moto).await?);
                Ok((
                    BrokerServer::sqs(a, fifo).await?,
                    BrokerServer::sqs(b, fifo).await?,
                ))
            }
            Sink::Kinesis => {
                let (a, b) = (blocking(Server::moto).await?, blocking(Server::moto).await?);
                Ok((
                    BrokerServer::kinesis(a, run).await?,
                    BrokerServer::kinesis(b, run).await?,
                ))
            }
            Sink::Sns { fifo } => {
                let (a, b) = (blocking(Server::moto).await?, blocking(Server::moto).await?);
                Ok((
                    BrokerServer::sns(a, fifo).await?,
                    BrokerServer::sns(b, fifo).await?,
                ))
            }
            Sink::PubSub => {
                let (a, b) = (
                    blocking(Server::pubsub).await?,
                    blocking(Server::pubsub).await?,
                );
                Ok((
                    BrokerServer::pubsub(a, run).await?,
                    BrokerServer::pubsub(b, run).await?,
                ))
            }
            Sink::Pulsar => {
                let server = tokio::task::spawn_blocking(move || {
                    let server = PulsarServer::start();
                    for ns in VHOSTS_PULSAR {
                        server.namespace(ns)?;
                    }
                    Ok::<_, String>(server)
                })
                .await
                .map_err(|e| format!("pulsar: {e}"))??;
                let client = Arc::new(server.client().await);
                let port = server.port;
                let running: Arc<dyn std::any::Any + Send + Sync> = Arc::new(server);
                let pair = VHOSTS_PULSAR.map(|ns| BrokerServer {
                    vhost: ns.to_owned(),
                    pulsar: Some(Arc::clone(&client)),
                    streams: run
                        .cases
                        .iter()
                        .map(|c| format!("outbox.event.{}", c.name))
                        .collect(),
                    ..BrokerServer::shared(port, Arc::clone(&running))
                });
                let [dbz, wr] = pair;
                Ok((dbz, wr))
            }
        }
    }

    /// `@SERVER@`: the address as the sink's keys take it (RabbitMQ's
    /// host: `@PORT@` and `@VHOST@` give the rest).
    fn address(self, server: &BrokerServer) -> String {
        match self {
            Sink::NatsJetStream => format!("nats://127.0.0.1:{}", server.port),
            Sink::Redis => format!("127.0.0.1:{}", server.port),
            Sink::RabbitMq | Sink::RabbitMqStream => "127.0.0.1".to_owned(),
            Sink::Http => format!("http://127.0.0.1:{}/events", server.port),
            Sink::Sqs { .. } | Sink::Kinesis | Sink::Sns { .. } => {
                format!("http://127.0.0.1:{}", server.port)
            }
            Sink::PubSub => format!("127.0.0.1:{}", server.port),
            Sink::Pulsar => format!("pulsar://127.0.0.1:{}", server.port),
        }
    }

    /// How many messages the server holds, without taking any: SQS's
    /// receive (SNS: of the subscribed queue) would hide a message (and deleting it would let a FIFO
    /// queue take its duplicate again), so the queue's counters are asked
    /// instead; other brokers are read.
    async fn published(self, server: &BrokerServer) -> Result<usize, String> {
        match &server.sqs {
            Some(q) => q.held().await,
            None => Ok(count(&self.read(server).await?.messages)),
        }
    }

    /// The environment both relays start with: for SQS, Kinesis and SNS the
    /// AWS SDKs' default chain finds the test keys in it, and nothing else
    /// (no profile files, no instance metadata: only loopback is reached).
    fn environment(self) -> &'static [(&'static str, Option<&'static str>)] {
        match self {
            Sink::Sqs { .. } | Sink::Kinesis | Sink::Sns { .. } => AWS_ENV,
            _ => &[],
        }
    }

    /// Debezium Server's environment: [`Sink::environment`], and for
    /// Kinesis [`KINESIS_JAVA_OPTIONS`] as `JAVA_TOOL_OPTIONS`.
    fn debezium_environment(self) -> Vec<(&'static str, Option<&'static str>)> {
        let mut environment = self.environment().to_vec();
        if self == Sink::Kinesis {
            environment.push(("JAVA_TOOL_OPTIONS", Some(KINESIS_JAVA_OPTIONS)));
        }
        environment
    }

    /// Everything the server holds, by destination, in order.
    async fn read(self, server: &BrokerServer) -> Result<Read, String> {
        let messages = match self {
            Sink::NatsJetStream => return read_nats(server.port).await,
            Sink::Redis => read_redis(server.port).await?,
            Sink::RabbitMq => read_amqp(server).await?,
            Sink::Http => server.http.as_ref().map(|c| c.read()).unwrap_or_default(),
            Sink::RabbitMqStream => read_streams(server).await?,
            Sink::Sqs { .. } | Sink::Sns { .. } => read_sqs(server).await?,
            Sink::Kinesis => read_kinesis(server).await?,
            Sink::PubSub => read_pubsub(server).await?,
            Sink::Pulsar => read_pulsar(server).await?,
        };
        Ok(Read {
            messages,
            streams: BTreeMap::new(),
        })
    }
}

/// The broker server of one relay, stopped on drop (the last relay's
/// drop, when they share one).
struct BrokerServer {
    port: u16,
    /// RabbitMQ: the relay's virtual host.
    vhost: String,
    /// What runs it: a [`Server`] or a [`Capture`].
    _running: Arc<dyn std::any::Any + Send + Sync>,
    /// RabbitMQ: the queues read, and what they gave so far.
    amqp: Option<AmqpQueues>,
    /// HTTP: the capture server.
    http: Option<Arc<Capture>>,
    /// RabbitMQ streams (`port` is the stream port) and Kinesis: the
    /// streams read.
    streams: Vec<String>,
    /// SQS: the relay's queue; SNS: the queue subscribed to its topic.
    sqs: Option<SqsQueue>,
    /// SNS: the relay's topic's ARN (`@TOPIC_ARN@`).
    topic_arn: Option<String>,
    /// Kinesis: a client of the relay's moto server.
    kinesis: Option<aws_sdk_kinesis::Client>,
    /// Pub/Sub: the relay's subscriptions, and what they gave so far.
    pubsub: Option<PubSubRead>,
    /// Pulsar: a client of the run's server (`vhost` is the namespace,
    /// `streams` the topics).
    pulsar: Option<Arc<pulsar::Pulsar<pulsar::TokioExecutor>>>,
}

impl BrokerServer {
    /// A relay's share of a server the run's relays share.
    fn shared(port: u16, running: Arc<dyn std::any::Any + Send + Sync>) -> BrokerServer {
        BrokerServer {
            port,
            vhost: String::new(),
            _running: running,
            amqp: None,
            http: None,
            streams: Vec::new(),
            sqs: None,
            kinesis: None,
            topic_arn: None,
            pubsub: None,
            pulsar: None,
        }
    }

    /// A Pub/Sub emulator with a topic per case of `run`
    /// (`outbox.event.<case>`: Debezium Server creates none) and an ordered
    /// subscription on each.
    async fn pubsub(server: Server, run: &Run) -> Result<BrokerServer, String> {
        let clients = PubSubClients::new(server.port).await;
        let mut subscriptions = Vec::new();
        for case in run.cases {
            let topic = format!("outbox.event.{}", case.name);
            let sub = clients.topic_with_subscription(&topic).await;
            subscriptions.push((topic, sub));
        }
        Ok(BrokerServer {
            pubsub: Some(PubSubRead {
                clients,
                subscriptions,
                got: tokio::sync::Mutex::default(),
            }),
            ..BrokerServer::of(server)
        })
    }

    fn of(server: Server) -> BrokerServer {
        BrokerServer::shared(server.port, Arc::new(server))
    }

    /// A moto server with the run's queue created on it.
    async fn sqs(server: Server, fifo: bool) -> Result<BrokerServer, String> {
        let queue = SqsQueue::create(server.port, fifo, "sqs").await?;
        Ok(BrokerServer {
            sqs: Some(queue),
            ..BrokerServer::of(server)
        })
    }

    /// A moto server with the run's topic ([`SQS_QUEUE`]; FIFO with
    /// content-based deduplication, which Debezium Server needs as it
    /// sends no deduplication id) and a queue of the same name subscribed
    /// to it with `RawMessageDelivery` (the message as published, each
    /// attribute a message attribute; moto's envelope of a non-raw
    /// delivery is its own).
    async fn sns(server: Server, fifo: bool) -> Result<BrokerServer, String> {
        let queue = SqsQueue::create(server.port, fifo, "sns").await?;
        let queue_arn = queue.arn().await?;
        let sns = sns_client(server.port).await;
        let name = queue.name().to_owned();
        let mut create = sns.create_topic().name(&name);
        if fifo {
            create = create
                .attributes("FifoTopic", "true")
                .attributes("ContentBasedDeduplication", "true");
        }
        let arn = create
            .send()
            .await
            .map_err(|e| format!("create topic {name}: {}", DisplayErrorContext(&e)))?
            .topic_arn
            .ok_or_else(|| format!("create topic {name}: no ARN"))?;
        sns.subscribe()
            .topic_arn(&arn)
            .protocol("sqs")
            .endpoint(queue_arn)
            .attributes("RawMessageDelivery", "true")
            .send()
            .await
            .map_err(|e| format!("subscribe to {arn}: {}", DisplayErrorContext(&e)))?;
        Ok(BrokerServer {
            sqs: Some(queue),
            topic_arn: Some(arn),
            ..BrokerServer::of(server)
        })
    }

    /// A moto server with a stream of one shard per case of `run`
    /// (`outbox.event.<case>`: Debezium Server creates none), so that each
    /// destination's records are in one order.
    async fn kinesis(server: Server, run: &Run) -> Result<BrokerServer, String> {
        let client = kinesis_client(server.port).await;
        let streams: Vec<String> = run
            .cases
            .iter()
            .map(|c| format!("outbox.event.{}", c.name))
            .collect();
        for stream in &streams {
            client
                .create_stream()
                .stream_name(stream)
                .shard_count(1)
                .send()
                .await
                .map_err(|e| format!("create stream {stream}: {}", DisplayErrorContext(&e)))?;
        }
        Ok(BrokerServer {
            streams,
            kinesis: Some(client),
            ..BrokerServer::of(server)
        })
    }

    fn http(capture: Capture) -> BrokerServer {
        let capture = Arc::new(capture);
        BrokerServer {
            http: Some(Arc::clone(&capture)),
            ..BrokerServer::shared(capture.port, capture)
        }
    }
}

/// Pulsar: the namespaces of the run's relays, Debezium Server's first.
const VHOSTS_PULSAR: [&str; 2] = ["dbz", "walrelay"];

/// A relay's subscriptions on its Pub/Sub emulator, one per destination;
/// a message is delivered once, so what was read is kept.
struct PubSubRead {
    clients: PubSubClients,
    /// Topic (the destination) and its subscription.
    subscriptions: Vec<(String, String)>,
    /// By destination, with the emulator's id of each (its stored order).
    got: tokio::sync::Mutex<BTreeMap<String, Vec<(u64, Msg)>>>,
}

/// A relay's queues on RabbitMQ, one per destination; `basic.get` takes a
/// message once, so what was read is kept.
struct AmqpQueues {
    queues: Vec<String>,
    got: tokio::sync::Mutex<Destinations>,
}

/// SQS: the queue each relay's moto server holds (with `.fifo` on a FIFO
/// run); every case's messages land in it, since the sink ignores the
/// destination. SNS: the topic's name and its subscribed queue's (Debezium
/// Server publishes every record to `topic.arn`).
const SQS_QUEUE: &str = "outbox";

/// The environment of both relays on an SQS, Kinesis or SNS run (a name without
/// a value is removed): test keys for the SDKs' default chain, no profile files, no
/// instance metadata (169.254.169.254), no session token of the caller's.
const AWS_ENV: &[(&str, Option<&str>)] = &[
    ("AWS_ACCESS_KEY_ID", Some("test")),
    ("AWS_SECRET_ACCESS_KEY", Some("test")),
    ("AWS_EC2_METADATA_DISABLED", Some("true")),
    ("AWS_CONFIG_FILE", Some("/dev/null")),
    ("AWS_SHARED_CREDENTIALS_FILE", Some("/dev/null")),
    ("AWS_SESSION_TOKEN", None),
    ("AWS_PROFILE", None),
];

/// Debezium Server's JVM options on a Kinesis run, given as
/// `JAVA_TOOL_OPTIONS`: its AWS SDK (2.17) speaks CBOR to Kinesis by
/// default, which moto cannot read (HTTP 500, and Debezium Server stops
/// after five attempts); the system property turns CBOR off (the
/// environment variable `AWS_CBOR_ENABLED` does not). Through
/// `JAVA_TOOL_OPTIONS` rather than `WALRELAY_DBZS_JAVA_OPTS`, which would
/// replace `debezium-server.sh`'s heap and JIT options and with them the
/// AOT cache it picks (one per option set).
const KINESIS_JAVA_OPTIONS: &str = "-Daws.cborEnabled=false";

/// A relay's queue on its moto server. A received message is deleted at
/// once and kept here; counting asks the queue's counters instead
/// ([`Sink::published`]), so nothing leaves the queue before the last read.
struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
    fifo: bool,
    /// The service that sent the FIFO ids, naming their attributes
    /// (`sqs`, or `sns` for the queue subscribed to a topic).
    service: &'static str,
    got: tokio::sync::Mutex<Vec<Msg>>,
}

impl SqsQueue {
    /// Creates [`SQS_QUEUE`] on the moto server at `port`: standard, or
    /// FIFO with content-based deduplication (Debezium Server sends no
    /// deduplication id, and a FIFO queue without it stops Debezium Server
    /// at the first event).
    async fn create(port: u16, fifo: bool, service: &'static str) -> Result<SqsQueue, String> {
        let client = sqs_client(port).await;
        let name = if fifo {
            format!("{SQS_QUEUE}.fifo")
        } else {
            SQS_QUEUE.to_owned()
        };
        let mut create = client.create_queue().queue_name(&name);
        if fifo {
            create = create
                .attributes(QueueAttributeName::FifoQueue, "true")
                .attributes(QueueAttributeName::ContentBasedDeduplication, "true");
        }
        let url = create
            .send()
            .await
            .map_err(|e| format!("create queue {name}: {}", DisplayErrorContext(&e)))?
            .queue_url
            .ok_or_else(|| format!("create queue {name}: no URL"))?;
        Ok(SqsQueue {
            client,
            url,
            fifo,
            service,
            got: tokio::sync::Mutex::default(),
        })
    }

    /// The queue's name, the last part of its URL.
    fn name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(SQS_QUEUE)
    }

    /// The queue's ARN, for a subscription.
    async fn arn(&self) -> Result<String, String> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "GetQueueAttributes {}: {}",
                    self.url,
                    DisplayErrorContext(&e)
                )
            })?;
        out.attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| format!("{}: no QueueArn", self.url))
    }

    /// Messages read so far, and those the queue holds (visible or not).
    async fn held(&self) -> Result<usize, String> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "GetQueueAttributes {}: {}",
                    self.url,
                    DisplayErrorContext(&e)
                )
            })?;
        let attrs = out.attributes().cloned().unwrap_or_default();
        let number = |n: &QueueAttributeName| -> usize {
            attrs.get(n).and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        Ok(self.got.lock().await.len()
            + number(&QueueAttributeName::ApproximateNumberOfMessages)
            + number(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible))
    }
}

/// One outbox table (or the logical-message outbox) of a run, routed to
/// `outbox.event.<name>`.
struct Case {
    /// Also the table's name (`-` as `_`) and the events' aggregate type.
    name: &'static str,
    /// The table's DDL under `tests/compat/server/`; None for messages.
    table: Option<&'static str>,
    /// The writes, under `tests/compat/server/`.
    feed: &'static str,
    /// Messages Debezium Server publishes for them.
    records: usize,
}

/// A last write that stops Debezium Server, after every case's messages
/// arrived.
struct Fatal {
    /// The case whose table it writes to (and whose destination it goes to).
    case: &'static str,
    feed: &'static str,
}

/// One start of each relay from `tests/compat/server/<name>/application.properties`.
struct Run {
    name: &'static str,
    sink: Sink,
    cases: &'static [Case],
    fatal: Option<Fatal>,
    /// RabbitMQ: the run's `exchange` (a direct exchange, each case's queue
    /// bound with its topic as the key); None: an exchange per topic.
    exchange: Option<&'static str>,
}

const fn table(name: &'static str, ddl: &'static str, feed: &'static str, records: usize) -> Case {
    Case {
        name,
        table: Some(ddl),
        feed,
        records,
    }
}

const fn messages(records: usize) -> Case {
    Case {
        name: "messages",
        table: None,
        feed: "messages-feed.sql",
        records,
    }
}

/// The EventRouter at its defaults, formats at theirs (json with schemas
/// for key, value and headers): the outbox way (insert and delete), a NOT
/// NULL and a nullable key, NULL payload and key, non-ASCII text.
const DEFAULT_CASES: &[Case] = &[
    table("defaults", "outbox.sql", "defaults-feed.sql", 3),
    table("nulls", "outbox-nullable.sql", "nulls-feed.sql", 3),
    table("unicode", "outbox-nullable.sql", "unicode-feed.sql", 2),
];

/// The matrix. Record counts are what Debezium Server 3.6.1 published.
const RUNS: &[Run] = &[
    Run {
        name: "nats-json",
        sink: Sink::NatsJetStream,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    Run {
        name: "redis-json",
        sink: Sink::Redis,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    // Header and envelope placements and table.expand.json.payload, over
    // rows and logical decoding messages; then a header value beyond ASCII,
    // which jnats refuses: Debezium Server stops.
    Run {
        name: "nats-options",
        sink: Sink::NatsJetStream,
        cases: &[
            table("placements", "options.sql", "placements-feed.sql", 3),
            table("expand", "options.sql", "expand-feed.sql", 4),
            messages(3),
        ],
        fatal: Some(Fatal {
            case: "placements",
            feed: "fatal-header-feed.sql",
        }),
        exchange: None,
    },
    // message.format=extended, simplestring key and value, headers without
    // schemas, header placements, null.key of its own.
    Run {
        name: "redis-extended",
        sink: Sink::Redis,
        cases: &[
            table("extended", "options.sql", "extended-feed.sql", 5),
            messages(3),
        ],
        fatal: None,
        exchange: None,
    },
    // RabbitMQ at defaults: the exchange is the topic, routing key "",
    // delivery mode 2, the header envelopes as long strings. Then a record
    // whose exchange does not exist.
    Run {
        name: "rabbitmq-json",
        sink: Sink::RabbitMq,
        cases: DEFAULT_CASES,
        fatal: Some(Fatal {
            case: "unicode",
            feed: "fatal-exchange-feed.sql",
        }),
        exchange: None,
    },
    // The placements, expanded JSON and messages of nats-options, header
    // values beyond ASCII (which AMQP carries), the headers as
    // jsonbytearray, the routing key from the record key, delivery mode 1.
    Run {
        name: "rabbitmq-options",
        sink: Sink::RabbitMq,
        cases: OPTION_CASES,
        fatal: None,
        exchange: None,
    },
    // simplestring key and value (null.value for a NULL payload), headers
    // without schemas, one exchange of the run's (`exchange`), the routing
    // key from the topic, autoCreateRoutingKey.
    Run {
        name: "rabbitmq-simplestring",
        sink: Sink::RabbitMq,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: Some("outbox"),
    },
    // The routing key from a key the converter gives as byte[]
    // (jsonbytearray): Debezium Server's first record stops it; walrelay
    // refuses the file at load.
    Run {
        name: "rabbitmq-key-bytes",
        sink: Sink::RabbitMq,
        cases: &[table("placements", "options.sql", "no-feed.sql", 0)],
        fatal: Some(Fatal {
            case: "placements",
            feed: "fatal-header-feed.sql",
        }),
        exchange: None,
    },
    // rabbitmqstream at its defaults: the stream is the topic (each relay
    // creates its own, in a virtual host of its own), message-id the key,
    // the headers as application properties.
    Run {
        name: "rabbitmqstream-json",
        sink: Sink::RabbitMqStream,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    // The option cases on rabbitmqstream, with a producer name and a
    // null.value of its own.
    Run {
        name: "rabbitmqstream-options",
        sink: Sink::RabbitMqStream,
        cases: OPTION_CASES,
        fatal: None,
        exchange: None,
    },
    // simplestring key and value (message-id the bare key, a NULL payload
    // null.value), headers without schemas, a producer name; then a NULL
    // key, which stops Debezium Server.
    Run {
        name: "rabbitmqstream-simplestring",
        sink: Sink::RabbitMqStream,
        cases: &[
            table("defaults", "outbox.sql", "defaults-feed.sql", 3),
            table(
                "keyed-nulls",
                "outbox-nullable.sql",
                "keyed-nulls-feed.sql",
                2,
            ),
            table("unicode", "outbox-nullable.sql", "unicode-feed.sql", 2),
        ],
        fatal: Some(Fatal {
            case: "unicode",
            feed: "fatal-null-key-feed.sql",
        }),
        exchange: None,
    },
    // HTTP with debezium.format.value=json (required), otherwise defaults:
    // one POST per event, the header envelopes base64 in X-DEBEZIUM-*.
    Run {
        name: "http-json",
        sink: Sink::Http,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    // simplestring key and value: a NULL payload is a null value, not sent
    // (two of the nulls case's three rows); headers without schemas;
    // Standard Webhooks signatures (WEBHOOK_KEY).
    Run {
        name: "http-simplestring",
        sink: Sink::Http,
        cases: &[
            table("defaults", "outbox.sql", "defaults-feed.sql", 3),
            table("nulls", "outbox-nullable.sql", "nulls-feed.sql", 1),
            table("unicode", "outbox-nullable.sql", "unicode-feed.sql", 2),
        ],
        fatal: None,
        exchange: None,
    },
    // The option cases over HTTP, under a header prefix of its own and not
    // base64-encoded (so header values stay ASCII here: the JDK client
    // refuses a header character above 255); batch mode, a record a batch.
    Run {
        name: "http-options",
        sink: Sink::Http,
        cases: &[
            table("placements", "options.sql", "placements-feed.sql", 3),
            table("expand", "options.sql", "expand-feed.sql", 4),
            messages(3),
        ],
        fatal: None,
        exchange: None,
    },
    // sqs at its defaults (json with schemas) to a standard queue: every
    // case in the one queue.url, compared as a whole, in order.
    Run {
        name: "sqs-json",
        sink: Sink::Sqs { fifo: false },
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    // A FIFO queue with content-based deduplication: Debezium Server's
    // group is cdc-group and its deduplication id the body's SHA-256, so
    // its third nulls row (the same body as the first) is dropped by the
    // queue (nulls last, so that only the end differs); walrelay's are the
    // key and the event id.
    Run {
        name: "sqs-fifo",
        sink: Sink::Sqs { fifo: true },
        cases: &[
            table("defaults", "outbox.sql", "defaults-feed.sql", 3),
            table("unicode", "outbox-nullable.sql", "unicode-feed.sql", 2),
            table("nulls", "outbox-nullable.sql", "nulls-feed.sql", 2),
        ],
        fatal: None,
        exchange: None,
    },
    // kinesis at its defaults (json with schemas): a stream per
    // destination, the value as the data, the serialised key as the
    // partition key.
    Run {
        name: "kinesis-json",
        sink: Sink::Kinesis,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    // sns at its defaults to a standard topic, a queue subscribed by raw
    // delivery: the value and headers before the converters. A NULL
    // payload last: Debezium Server publishes an empty message, walrelay
    // refuses it and stops.
    Run {
        name: "sns-json",
        sink: Sink::Sns { fifo: false },
        cases: SNS_CASES,
        fatal: None,
        exchange: None,
    },
    // A FIFO topic with content-based deduplication (Debezium Server sends
    // no deduplication id): both relays' group is the key as text
    // (default when null); walrelay's deduplication id is the event id.
    Run {
        name: "sns-fifo",
        sink: Sink::Sns { fifo: true },
        cases: SNS_CASES,
        fatal: None,
        exchange: None,
    },
    // pubsub at its defaults (json with schemas, ordering on): a topic and
    // an ordered subscription per destination; the value as the data,
    // every header an attribute, the serialised key as the ordering key.
    Run {
        name: "pubsub-json",
        sink: Sink::PubSub,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
    // pulsar at its defaults (json with schemas): a topic per destination
    // in the relay's namespace, the value as the payload under a STRING
    // schema, the serialised key as the message key, every header a
    // property.
    Run {
        name: "pulsar-json",
        sink: Sink::Pulsar,
        cases: DEFAULT_CASES,
        fatal: None,
        exchange: None,
    },
];

/// The default cases for SNS: the nulls case's rows with a NULL key and a
/// payload (null-keys), then one NULL payload alone and last
/// (null-payload), which stops walrelay (SNS refuses an empty message).
const SNS_CASES: &[Case] = &[
    table("defaults", "outbox.sql", "defaults-feed.sql", 3),
    table("unicode", "outbox-nullable.sql", "unicode-feed.sql", 2),
    table("null-keys", "outbox-nullable.sql", "null-keys-feed.sql", 2),
    table(
        "null-payload",
        "outbox-nullable.sql",
        "null-payload-feed.sql",
        1,
    ),
];

/// EventRouter placements and table.expand.json.payload over rows and
/// logical decoding messages, and header values beyond ASCII (jnats
/// refuses those: NATS has them as its fatal step instead).
const OPTION_CASES: &[Case] = &[
    table("placements", "options.sql", "placements-feed.sql", 3),
    table("expand", "options.sql", "expand-feed.sql", 4),
    table("headers", "options.sql", "headers-feed.sql", 2),
    messages(3),
];

/// Differences walrelay is known to have, each with its reason (see the
/// module doc). `case` is the run's name.
const KNOWN_DIFFERENCES: &[Known] = &[
    // A header value beyond ASCII (`tenant` = "Zoë"): jnats refuses it
    // (IllegalArgumentException "Header value has invalid character: 235"),
    // the batch fails and Debezium Server exits; walrelay publishes the
    // value's UTF-8 bytes and goes on.
    Known {
        case: "nats-options",
        field: "fatal record",
        debezium: "exited",
        walrelay: "published it and kept running",
        reason: "jnats refuses a header value beyond ASCII; walrelay sends its UTF-8 bytes",
        intermittent: false,
    },
    Known {
        case: "nats-options",
        field: "record count",
        debezium: "3",
        walrelay: "4",
        reason: "the fatal record, which only walrelay published",
        intermittent: false,
    },
    Known {
        case: "nats-options",
        field: "extra in walrelay",
        debezium: "<null>",
        walrelay: "\"tenantId\":\"Zoë\"",
        reason: "the fatal record, which only walrelay published",
        intermittent: false,
    },
    // A record whose exchange does not exist: both stop without it.
    // Debezium Server's channel is closed (404) and it exits; walrelay
    // refuses it as no_exchange, and [errors] at tolerance none stops the
    // pipeline naming the event (exit 1). Under tolerance all walrelay
    // dead-letters it instead and goes on.
    Known {
        case: "rabbitmq-json",
        field: "fatal record",
        debezium: "exited",
        walrelay: "exited with exit status: 1",
        reason: "a missing exchange: both stop (walrelay through [errors], naming the event)",
        intermittent: false,
    },
    // routingKey.source=key with a byte-array key format (jsonbytearray,
    // binary): Debezium Server's sink refuses the key ("Unexpected data
    // type '[B'") and exits on the first record; walrelay refuses the pair
    // at load, naming routingKey.source, and never streams.
    Known {
        case: "rabbitmq-key-bytes",
        field: "stop",
        debezium: "streaming",
        walrelay: "before streaming",
        reason: "walrelay refuses at load the pair Debezium Server stops on at the first record",
        intermittent: false,
    },
    Known {
        case: "rabbitmq-key-bytes",
        field: "fatal record",
        debezium: "exited",
        walrelay: "exited with exit status",
        reason: "both stop: Debezium Server on the record, walrelay at load",
        intermittent: false,
    },
    // A NULL key under the simplestring key format: Debezium Server's
    // rabbitmqstream sink takes message-id from the key string, refuses a
    // null one ("Unexpected data type 'null'") and exits; walrelay sends
    // the message without message-id, on purpose
    // (docs/debezium-server-sinks.md §6).
    Known {
        case: "rabbitmqstream-simplestring",
        field: "fatal record",
        debezium: "exited",
        walrelay: "published it and kept running",
        reason: "a NULL key: Debezium Server stops, walrelay sends no message-id",
        intermittent: false,
    },
    Known {
        case: "rabbitmqstream-simplestring",
        field: "record count",
        debezium: "2",
        walrelay: "3",
        reason: "the fatal record, which only walrelay published",
        intermittent: false,
    },
    Known {
        case: "rabbitmqstream-simplestring",
        field: "extra in walrelay",
        debezium: "<null>",
        walrelay: "{\"n\": 8}",
        reason: "the fatal record, which only walrelay published",
        intermittent: false,
    },
    // FIFO: walrelay groups by record key (the key's JSON, or `h-` and
    // its SHA-256 when not 1-128 printable ASCII characters) so that
    // aggregates go in parallel, where Debezium Server puts every record
    // in cdc-group (fifo.message.group.id would make walrelay do the
    // same); docs/debezium-server-sinks.md §8.9.
    Known {
        case: "sqs-fifo",
        field: "sqs MessageGroupId",
        debezium: "cdc-group",
        walrelay: "{\"schema\":",
        reason: "walrelay's FIFO group is the record key, on purpose",
        intermittent: false,
    },
    Known {
        case: "sqs-fifo",
        field: "sqs MessageGroupId",
        debezium: "cdc-group",
        walrelay: "h-",
        reason: "walrelay's FIFO group is the record key, hashed when not printable ASCII",
        intermittent: false,
    },
    // walrelay sends the event id as MessageDeduplicationId; Debezium
    // Server sends none, so the queue takes the body's SHA-256 ...
    Known {
        case: "sqs-fifo",
        field: "sqs MessageDeduplicationId",
        debezium: "sha256(body)",
        walrelay: "<uuid>",
        reason: "walrelay's deduplication id is the event id, on purpose",
        intermittent: false,
    },
    // ... and drops an event whose body equals one before it (the second
    // NULL payload of the nulls case); walrelay's id keeps it.
    Known {
        case: "sqs-fifo",
        field: "record count",
        debezium: "7",
        walrelay: "8",
        reason: "content-based deduplication drops Debezium Server's second NULL payload",
        intermittent: false,
    },
    Known {
        case: "sqs-fifo",
        field: "extra in walrelay",
        debezium: "<null>",
        walrelay: "\"payload\":null}",
        reason: "content-based deduplication drops Debezium Server's second NULL payload",
        intermittent: false,
    },
    // A NULL payload (the null-payload case, last): Debezium Server's sns
    // sink publishes the raw value, null, as an empty message, which moto
    // takes and SNS refuses (InvalidParameter: a message cannot be empty);
    // walrelay's StringConverter gives a null value, which its sns sink
    // refuses for itself, and [errors] at tolerance none stops the pipeline
    // naming the event (exit 1); docs/debezium-server-sinks.md §8.11.
    Known {
        case: "sns-json",
        field: "stop",
        debezium: "kept running",
        walrelay: "exited with exit status: 1",
        reason: NULL_PAYLOAD,
        intermittent: false,
    },
    Known {
        case: "sns-json",
        field: "record count",
        debezium: "8",
        walrelay: "7",
        reason: NULL_PAYLOAD,
        intermittent: false,
    },
    Known {
        case: "sns-json",
        field: "missing in walrelay",
        debezium: "",
        walrelay: "<null>",
        reason: NULL_PAYLOAD,
        intermittent: false,
    },
    Known {
        case: "sns-fifo",
        field: "stop",
        debezium: "kept running",
        walrelay: "exited with exit status: 1",
        reason: NULL_PAYLOAD,
        intermittent: false,
    },
    Known {
        case: "sns-fifo",
        field: "record count",
        debezium: "8",
        walrelay: "7",
        reason: NULL_PAYLOAD,
        intermittent: false,
    },
    Known {
        case: "sns-fifo",
        field: "missing in walrelay",
        debezium: "",
        walrelay: "<null>",
        reason: NULL_PAYLOAD,
        intermittent: false,
    },
    // FIFO topic: walrelay sends the event id as MessageDeduplicationId
    // (fifo.message.dedup.id.header unset); Debezium Server sends none, so
    // the topic takes the message's SHA-256.
    Known {
        case: "sns-fifo",
        field: "sns MessageDeduplicationId",
        debezium: "sha256(body)",
        walrelay: "<uuid>",
        reason: "walrelay's deduplication id is the event id, on purpose",
        intermittent: false,
    },
    // A key that is not 1-128 printable ASCII characters (`Zoë-😀`):
    // Debezium Server sends it as the group, which SNS's MessageGroupId
    // (alphanumerics and punctuation) does not allow and moto takes;
    // walrelay sends `h-` and its SHA-256.
    Known {
        case: "sns-fifo",
        field: "sns MessageGroupId",
        debezium: "Zoë-😀",
        walrelay: "h-",
        reason: "walrelay hashes a group SNS would refuse",
        intermittent: false,
    },
];

/// Why walrelay stops at a NULL payload on SNS where Debezium Server
/// publishes an empty message.
const NULL_PAYLOAD: &str = "a NULL payload: Debezium Server publishes an empty message (moto takes it, SNS refuses it); walrelay refuses the null value and stops under errors.tolerance=none";
const H2C: &str = "the JDK client offers an h2c upgrade; walrelay speaks HTTP/1.1 only";
const AGENT: &str = "each client names itself";
const IDEMPOTENCY: &str = "walrelay's Idempotency-Key, the event id, on purpose";
const CASE: &str = "hyper writes header names in lower case (HTTP names are case-insensitive)";

/// What every HTTP run differs in, on purpose (docs/debezium-server-sinks.md
/// §7): walrelay speaks HTTP/1.1 only (the JDK client offers an h2c
/// upgrade, which the receiver does not take), names itself, adds
/// Idempotency-Key (the event id) and writes header names in lower case
/// (hyper's HeaderMap; HTTP field names are case-insensitive). Field,
/// Debezium's side, walrelay's side, reason, as in [`Known`].
const HTTP_KNOWN: &[(&str, &str, &str, &str)] = &[
    ("http connection", "Upgrade, HTTP2-Settings", "<null>", H2C),
    ("http upgrade", "h2c", "<null>", H2C),
    ("http http2-settings", "", "<null>", H2C),
    ("http user-agent", "Java-http-client/", "walrelay/", AGENT),
    ("http idempotency-key", "<null>", "", IDEMPOTENCY),
    (
        "header names as sent",
        "Content-Length",
        "content-length",
        CASE,
    ),
];

/// The known differences of the run `name`: its [`KNOWN_DIFFERENCES`]
/// entries, and [`HTTP_KNOWN`] for an HTTP run.
fn known(name: &str) -> Vec<Known> {
    let mut out: Vec<Known> = KNOWN_DIFFERENCES
        .iter()
        .filter(|k| k.case == name)
        .map(|k| Known { ..*k })
        .collect();
    if let Some(run) = RUNS.iter().find(|r| r.name == name && r.sink == Sink::Http) {
        out.extend(
            HTTP_KNOWN
                .iter()
                .map(|&(field, debezium, walrelay, reason)| Known {
                    case: run.name,
                    field,
                    debezium,
                    walrelay,
                    reason,
                    intermittent: false,
                }),
        );
    }
    out
}

/// Header names and values, in the order a message carries them.
type Headers = Vec<(String, Option<Vec<u8>>)>;

/// One message as read back.
#[derive(Debug, Clone, Default)]
struct Msg {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// Names and values in the order the message carries them.
    headers: Headers,
    /// NATS: the header block's lines as sent (`name:value`), in order.
    lines: Vec<Vec<u8>>,
    /// What else a message carries, by name, compared one by one:
    /// RabbitMQ's routing key, properties and header value types; HTTP's
    /// transport headers and header names as sent.
    attrs: BTreeMap<String, String>,
}

impl Msg {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }
}

/// Messages by destination, each in order.
type Destinations = BTreeMap<String, Vec<Msg>>;

/// What a broker server holds.
#[derive(Default)]
struct Read {
    messages: Destinations,
    /// NATS: each stream's configuration as the server reports it.
    streams: BTreeMap<String, serde_json::Value>,
}

/// Waits for the node's boot, then opens walrelay's virtual host
/// (`VHOSTS[1]`) to `guest`.
fn walrelay_vhost(server: &Server) -> Result<(), String> {
    server.rabbitmqctl(&["await_startup"])?;
    server.rabbitmqctl(&["add_vhost", VHOSTS[1]])?;
    server.rabbitmqctl(&[
        "set_permissions",
        "-p",
        VHOSTS[1],
        "guest",
        ".*",
        ".*",
        ".*",
    ])?;
    Ok(())
}

fn count(d: &Destinations) -> usize {
    d.values().map(Vec::len).sum()
}

fn server_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/server")
}

/// One JetStream API request; the answer's JSON.
async fn js_api(
    client: &async_nats::Client,
    subject: String,
    body: &str,
) -> Result<serde_json::Value, String> {
    let answer = client
        .request(subject.clone(), body.to_owned().into())
        .await
        .map_err(|e| format!("{subject}: {e}"))?;
    serde_json::from_slice(&answer.payload).map_err(|e| format!("{subject}: {e}"))
}

/// Every message of every stream (all of them the relay's: the server is
/// its own), read with `$JS.API.STREAM.MSG.GET`, which gives the header
/// block as it was published.
async fn read_nats(port: u16) -> Result<Read, String> {
    let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
        .await
        .map_err(|e| format!("connect to nats on {port}: {e}"))?;
    let mut read = Read::default();
    let names = js_api(&client, "$JS.API.STREAM.NAMES".into(), "").await?;
    let names: Vec<String> = names["streams"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    for stream in names {
        let info = js_api(&client, format!("$JS.API.STREAM.INFO.{stream}"), "").await?;
        let last = info["state"]["last_seq"].as_u64().unwrap_or(0);
        read.streams.insert(stream.clone(), info["config"].clone());
        for seq in 1..=last {
            let got = js_api(
                &client,
                format!("$JS.API.STREAM.MSG.GET.{stream}"),
                &format!("{{\"seq\":{seq}}}"),
            )
            .await?;
            let m = &got["message"];
            let Some(subject) = m["subject"].as_str() else {
                continue; // deleted
            };
            let field = |name: &str| -> Result<Vec<u8>, String> {
                m[name]
                    .as_str()
                    .map_or(Ok(Vec::new()), base64_decode)
                    .map_err(|e| format!("{stream} #{seq} {name}: {e}"))
            };
            let (headers, lines) = nats_headers(&field("hdrs")?);
            read.messages
                .entry(subject.to_owned())
                .or_default()
                .push(Msg {
                    key: None,
                    value: Some(field("data")?),
                    headers,
                    lines,
                    attrs: BTreeMap::new(),
                });
        }
    }
    Ok(read)
}

/// A NATS header block (`NATS/1.0\r\n`, `name:value\r\n` lines, `\r\n`):
/// the headers (a value without the blanks before it, as clients read it)
/// and the lines as sent.
fn nats_headers(block: &[u8]) -> (Headers, Vec<Vec<u8>>) {
    let (mut headers, mut lines) = (Vec::new(), Vec::new());
    let mut split: Vec<&[u8]> = Vec::new();
    let mut rest = block;
    while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
        split.push(&rest[..i]);
        rest = &rest[i + 2..];
    }
    for line in split.into_iter().skip(1).filter(|l| !l.is_empty()) {
        lines.push(line.to_vec());
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &b""[..]),
        };
        let start = value
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t'))
            .unwrap_or(value.len());
        headers.push((
            String::from_utf8_lossy(name).into_owned(),
            Some(value[start..].to_vec()),
        ));
    }
    (headers, lines)
}

/// Standard base64 with padding, as the JetStream API writes it.
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let digit = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("not base64: {c:?}")),
        }
        .into())
    };
    let text = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Ok(out)
}

/// Every stream of the server (all of them the relay's), entry ids left
/// out. A compact entry (one field) is the key and the value; an extended
/// one is `key`, `value`, then the headers; anything else is all headers,
/// so that it shows.
async fn read_redis(port: u16) -> Result<Destinations, String> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("connect to redis on {port}: {e}"))?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .map_err(|e| format!("KEYS: {e}"))?;
    let mut out = Destinations::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("TYPE {key}: {e}"))?;
        if kind != "stream" {
            continue;
        }
        let reply: redis::Value = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("XRANGE {key}: {e}"))?;
        let entries = parse_xrange(reply).into_iter().map(redis_msg).collect();
        out.insert(key, entries);
    }
    Ok(out)
}

fn redis_msg(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Msg {
    let mut m = Msg::default();
    match fields.as_slice() {
        [(k, v)] => {
            m.key = Some(k.clone());
            m.value = Some(v.clone());
        }
        [(kn, k), (vn, v), rest @ ..] if kn == b"key" && vn == b"value" => {
            m.key = Some(k.clone());
            m.value = Some(v.clone());
            m.headers = headers_of(rest);
        }
        all => m.headers = headers_of(all),
    }
    m
}

fn headers_of(fields: &[(Vec<u8>, Vec<u8>)]) -> Headers {
    fields
        .iter()
        .map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), Some(v.clone())))
        .collect()
}

/// Declares, in `vhost`, a durable queue per name, each bound to a durable
/// fanout exchange of the same name, or with `exchange` to that one
/// (direct) with its name as the binding key.
async fn declare_amqp(
    port: u16,
    vhost: &str,
    names: &[String],
    exchange: Option<&str>,
) -> Result<(), String> {
    let conn = amqp_connect(port, vhost).await?;
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| format!("amqp channel: {e}"))?;
    let durable = || ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    if let Some(x) = exchange {
        ch.exchange_declare(
            x.into(),
            ExchangeKind::Direct,
            durable(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| format!("declare exchange {x} in {vhost}: {e}"))?;
    }
    for name in names {
        if exchange.is_none() {
            ch.exchange_declare(
                name.as_str().into(),
                ExchangeKind::Fanout,
                durable(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| format!("declare exchange {name} in {vhost}: {e}"))?;
        }
        ch.queue_declare(
            name.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| format!("declare queue {name} in {vhost}: {e}"))?;
        let (bound_to, key) = match exchange {
            Some(x) => (x, name.as_str()),
            None => (name.as_str(), ""),
        };
        ch.queue_bind(
            name.as_str().into(),
            bound_to.into(),
            key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| format!("bind queue {name} in {vhost}: {e}"))?;
    }
    let _ = conn.close(200, "declared".into()).await;
    Ok(())
}

async fn amqp_connect(port: u16, vhost: &str) -> Result<Connection, String> {
    let vhost = vhost.replace('/', "%2f");
    Connection::connect(
        &format!("amqp://guest:guest@127.0.0.1:{port}/{vhost}"),
        ConnectionProperties::default(),
    )
    .await
    .map_err(|e| format!("connect to rabbitmq on {port}: {e}"))
}

/// Every message of the relay's queues: those read before and what
/// `basic.get` gives now, by exchange.
async fn read_amqp(server: &BrokerServer) -> Result<Destinations, String> {
    let q = server.amqp.as_ref().expect("a RabbitMQ broker server");
    let mut got = q.got.lock().await;
    let conn = amqp_connect(server.port, &server.vhost).await?;
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| format!("amqp channel: {e}"))?;
    for queue in &q.queues {
        while let Some(m) = ch
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .map_err(|e| format!("basic.get {queue}: {e}"))?
        {
            let d = m.delivery;
            got.entry(d.exchange.to_string())
                .or_default()
                .push(amqp_msg(&d));
        }
    }
    let _ = conn.close(200, "read".into()).await;
    Ok(got.clone())
}

/// Every message of the relay's queue, in the order received (a moto
/// queue hands them in the order stored, FIFO or not), by queue name: those
/// read before and what `ReceiveMessage` gives now, each deleted once
/// received.
async fn read_sqs(server: &BrokerServer) -> Result<Destinations, String> {
    let q = server.sqs.as_ref().expect("an SQS broker server");
    let mut got = q.got.lock().await;
    loop {
        let out = q
            .client
            .receive_message()
            .queue_url(&q.url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .visibility_timeout(600)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| format!("ReceiveMessage {}: {}", q.url, DisplayErrorContext(&e)))?;
        if out.messages().is_empty() {
            break;
        }
        let mut delete = q.client.delete_message_batch().queue_url(&q.url);
        for (i, m) in out.messages().iter().enumerate() {
            let entry = DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .build()
                .map_err(|e| format!("delete entry: {e}"))?;
            delete = delete.entries(entry);
        }
        delete
            .send()
            .await
            .map_err(|e| format!("DeleteMessageBatch {}: {}", q.url, DisplayErrorContext(&e)))?;
        got.extend(
            out.messages()
                .iter()
                .map(|m| sqs_msg(m, q.fifo.then_some(q.service))),
        );
    }
    let mut out = Destinations::new();
    if !got.is_empty() {
        out.insert(q.name().to_owned(), got.clone());
    }
    Ok(out)
}

/// A received message as a [`Msg`]: no key (SQS has none), the body's
/// bytes, the message attributes as headers (a map: in name order), each
/// one's data type an attribute; on a FIFO queue the message group id and
/// the deduplication id ([`dedup_text`]) as attributes named after
/// `fifo`, the service that set them (`sqs MessageGroupId`; `sns ...`
/// through a FIFO topic's raw delivery).
fn sqs_msg(m: &aws_sdk_sqs::types::Message, fifo: Option<&str>) -> Msg {
    let body = m.body().unwrap_or_default().as_bytes().to_vec();
    let mut attrs = BTreeMap::new();
    let mut named: Vec<_> = m.message_attributes().into_iter().flatten().collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut headers = Headers::new();
    for (name, value) in named {
        attrs.insert(
            format!("attribute type {name}"),
            value.data_type().to_owned(),
        );
        let bytes = value
            .string_value()
            .map(|s| s.as_bytes().to_vec())
            .or_else(|| value.binary_value().map(|b| b.as_ref().to_vec()));
        headers.push((name.clone(), bytes));
    }
    if let Some(service) = fifo {
        let system = |n: MessageSystemAttributeName| {
            m.attributes()
                .and_then(|a| a.get(&n))
                .map_or_else(|| "<none>".to_owned(), String::clone)
        };
        attrs.insert(
            format!("{service} MessageGroupId"),
            system(MessageSystemAttributeName::MessageGroupId),
        );
        let dedup = system(MessageSystemAttributeName::MessageDeduplicationId);
        attrs.insert(
            format!("{service} MessageDeduplicationId"),
            dedup_text(&body, &dedup),
        );
    }
    Msg {
        key: None,
        value: Some(body),
        headers,
        lines: Vec::new(),
        attrs,
    }
}

/// Every record of each of the relay's Kinesis streams, by stream: each
/// shard from its start (`TRIM_HORIZON`), shard after shard in id order
/// (one shard here: the stream's order). Reading takes nothing, so it
/// serves the waiting's counts too.
/// Pub/Sub: each subscription's new messages (acknowledged), added to what
/// was read before; by destination, each ordering key's in the emulator's
/// stored order (keys in byte order: neither relay orders across keys). A
/// message: the ordering key as the key (none when empty), the data as
/// the value, the attributes as the headers (a map: in name order).
async fn read_pubsub(server: &BrokerServer) -> Result<Destinations, String> {
    let ps = server.pubsub.as_ref().expect("a Pub/Sub broker server");
    let mut got = ps.got.lock().await;
    for (topic, sub) in &ps.subscriptions {
        let read = ps
            .clients
            .read_until(sub, usize::MAX, Duration::from_millis(1500), || false)
            .await;
        let msgs = got.entry(topic.clone()).or_default();
        for m in read {
            let mut headers: Headers = m
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone().into_bytes())))
                .collect();
            headers.sort();
            msgs.push((
                m.seq,
                Msg {
                    key: (!m.key.is_empty()).then(|| m.key.clone().into_bytes()),
                    value: Some(m.data.clone()),
                    headers,
                    ..Msg::default()
                },
            ));
        }
        // Order is the service's per ordering key only (a key's requests
        // go on their own): by key, then stored order.
        msgs.sort_by(|(sa, a), (sb, b)| (&a.key, sa).cmp(&(&b.key, sb)));
    }
    Ok(got
        .iter()
        .filter(|(_, msgs)| !msgs.is_empty())
        .map(|(t, msgs)| (t.clone(), msgs.iter().map(|(_, m)| m.clone()).collect()))
        .collect())
}

/// Pulsar: each case's topic of the relay's namespace from its first
/// message (reading takes nothing). A message: the message key as the key,
/// the payload as the value, the properties as the headers (a map: in name
/// order); the schema version and the null-value mark as attributes.
async fn read_pulsar(server: &BrokerServer) -> Result<Destinations, String> {
    let client = server.pulsar.as_ref().expect("a Pulsar broker server");
    let mut got = Destinations::new();
    for topic in &server.streams {
        let full = format!("persistent://public/{}/{topic}", server.vhost);
        let msgs: Vec<Msg> = read_full(client, &full)
            .await
            .into_iter()
            .map(|m| {
                let mut headers: Headers = m
                    .properties
                    .iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone().into_bytes())))
                    .collect();
                headers.sort();
                let mut attrs = BTreeMap::new();
                attrs.insert(
                    "schema version".to_owned(),
                    m.schema_version.as_ref().map_or_else(
                        || "none".to_owned(),
                        |v| v.iter().map(|b| format!("{b:02x}")).collect(),
                    ),
                );
                attrs.insert("null value".to_owned(), m.null_value.to_string());
                Msg {
                    key: m.key.clone().map(String::into_bytes),
                    value: Some(m.data),
                    headers,
                    attrs,
                    ..Msg::default()
                }
            })
            .collect();
        if !msgs.is_empty() {
            got.insert(topic.clone(), msgs);
        }
    }
    Ok(got)
}

async fn read_kinesis(server: &BrokerServer) -> Result<Destinations, String> {
    let client = server.kinesis.as_ref().expect("a Kinesis broker server");
    let mut got = Destinations::new();
    for stream in &server.streams {
        let records = read_kinesis_stream(client, stream).await?;
        if !records.is_empty() {
            got.insert(stream.clone(), records);
        }
    }
    Ok(got)
}

async fn read_kinesis_stream(
    client: &aws_sdk_kinesis::Client,
    stream: &str,
) -> Result<Vec<Msg>, String> {
    let shards = client
        .list_shards()
        .stream_name(stream)
        .send()
        .await
        .map_err(|e| format!("ListShards {stream}: {}", DisplayErrorContext(&e)))?;
    let mut ids: Vec<&str> = shards
        .shards()
        .iter()
        .map(aws_sdk_kinesis::types::Shard::shard_id)
        .collect();
    ids.sort_unstable();
    let mut got = Vec::new();
    for shard in ids {
        let mut iterator = client
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(shard)
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .map_err(|e| format!("GetShardIterator {stream}: {}", DisplayErrorContext(&e)))?
            .shard_iterator;
        while let Some(it) = iterator {
            let out = client
                .get_records()
                .shard_iterator(it)
                .limit(10_000)
                .send()
                .await
                .map_err(|e| format!("GetRecords {stream}: {}", DisplayErrorContext(&e)))?;
            if out.records().is_empty() {
                break;
            }
            got.extend(out.records().iter().map(kinesis_msg));
            iterator = out.next_shard_iterator;
        }
    }
    Ok(got)
}

/// A Kinesis record as a [`Msg`]: the partition key as the key (as sent:
/// Debezium Server's is the serialised record key), the data as the
/// value; a record has no headers. Sequence numbers and arrival times are
/// the server's: not compared.
fn kinesis_msg(r: &aws_sdk_kinesis::types::Record) -> Msg {
    Msg {
        key: r.partition_key().map(|k| k.as_bytes().to_vec()),
        value: Some(r.data().as_ref().to_vec()),
        ..Msg::default()
    }
}

/// A deduplication id, comparable: `sha256(body)` when it is the SHA-256
/// of the body in hex (content-based deduplication: Debezium Server sends
/// none), else the id with any UUID masked (walrelay's: the event id).
fn dedup_text(body: &[u8], id: &str) -> String {
    let digest: String = openssl::sha::sha256(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if id == digest {
        "sha256(body)".to_owned()
    } else {
        mask_uuid(&Some(id.as_bytes().to_vec())).unwrap_or_default()
    }
}

/// Every message of each stream in the relay's virtual host, from the
/// first offset (a stream not created yet: none), by stream name. A stream
/// is read until nothing more comes for 500 ms (2 s for the first message).
async fn read_streams(server: &BrokerServer) -> Result<Destinations, String> {
    let env = Environment::builder()
        .host("127.0.0.1")
        .port(server.port)
        .virtual_host(&server.vhost)
        .build()
        .await
        .map_err(|e| format!("stream connect: {e}"))?;
    let mut got = Destinations::new();
    for stream in &server.streams {
        let Ok(mut consumer) = env
            .consumer()
            .offset(OffsetSpecification::First)
            .build(stream)
            .await
        else {
            continue;
        };
        let mut msgs = Vec::new();
        // A stream exists once a relay published to it: wait longer for
        // its first message than for the next.
        while let Ok(Some(d)) = tokio::time::timeout(
            Duration::from_millis(if msgs.is_empty() { 2000 } else { 500 }),
            consumer.next(),
        )
        .await
        {
            let d = d.map_err(|e| format!("stream {stream}: {e}"))?;
            msgs.push(stream_msg(d.offset(), d.message()));
        }
        let _ = consumer.handle().close().await;
        if !msgs.is_empty() {
            got.insert(stream.clone(), msgs);
        }
    }
    Ok(got)
}

/// A stream message as a [`Msg`]: the key is the message-id, the value
/// the data section; the application properties are the headers (a map:
/// read in name order), each value's AMQP type an attribute; the
/// properties, header, annotations and offset are attributes too.
fn stream_msg(offset: u64, m: &StreamMessage) -> Msg {
    let mut attrs = BTreeMap::new();
    let debug = |v: &dyn std::fmt::Debug| format!("{v:?}");
    attrs.insert("offset".to_owned(), offset.to_string());
    attrs.insert("publishing id".to_owned(), debug(&m.publishing_id()));
    attrs.insert("header".to_owned(), debug(&m.header()));
    attrs.insert(
        "message annotations".to_owned(),
        debug(&m.message_annotations()),
    );
    attrs.insert(
        "delivery annotations".to_owned(),
        debug(&m.delivery_annotations()),
    );
    let key = m.properties().and_then(|p| {
        let id = p.message_id.clone()?;
        attrs.insert(
            "message-id type".to_owned(),
            debug(&id).split('(').next().unwrap_or_default().to_owned(),
        );
        String::try_from(id).ok().map(String::into_bytes)
    });
    attrs.insert("properties".to_owned(), debug(&m.properties()));
    let mut props: Vec<(&String, &SimpleValue)> = m
        .application_properties()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    props.sort_by(|a, b| a.0.cmp(b.0));
    let mut headers = Headers::new();
    for (name, value) in props {
        let (kind, bytes) = match value {
            SimpleValue::String(s) => ("string", Some(s.as_bytes().to_vec())),
            SimpleValue::Binary(b) => ("binary", Some(b.clone())),
            SimpleValue::Null => ("null", None),
            other => ("other", Some(format!("{other:?}").into_bytes())),
        };
        attrs.insert(format!("property type {name}"), kind.to_owned());
        headers.push((name.clone(), bytes));
    }
    Msg {
        key,
        value: m.data().map(<[u8]>::to_vec),
        headers,
        lines: Vec::new(),
        attrs,
    }
}

/// A delivery as a [`Msg`]: no key (neither relay sends it), the body, the
/// headers (an AMQP table is a map: lapin gives them in name order, so
/// their order on the wire does not show), and as attributes the routing
/// key, every property and each header value's AMQP type.
fn amqp_msg(d: &lapin::message::Delivery) -> Msg {
    let p = &d.properties;
    let mut attrs = BTreeMap::new();
    attrs.insert("routing key".to_owned(), d.routing_key.to_string());
    let debug = |v: &dyn std::fmt::Debug| format!("{v:?}");
    for (name, value) in [
        ("content_type", debug(p.content_type())),
        ("content_encoding", debug(p.content_encoding())),
        ("delivery_mode", debug(p.delivery_mode())),
        ("priority", debug(p.priority())),
        ("correlation_id", debug(p.correlation_id())),
        ("reply_to", debug(p.reply_to())),
        ("expiration", debug(p.expiration())),
        ("message_id", debug(p.message_id())),
        ("timestamp", debug(p.timestamp())),
        ("type", debug(p.kind())),
        ("user_id", debug(p.user_id())),
        ("app_id", debug(p.app_id())),
        ("cluster_id", debug(p.cluster_id())),
    ] {
        attrs.insert(format!("property {name}"), value);
    }
    let mut headers = Headers::new();
    for (name, value) in p.headers().iter().flat_map(FieldTable::inner) {
        let (kind, bytes) = match value {
            AMQPValue::LongString(s) => ("long string", Some(s.as_bytes().to_vec())),
            AMQPValue::ByteArray(b) => ("byte array", Some(b.as_slice().to_vec())),
            AMQPValue::Void => ("void", None),
            other => ("other", Some(format!("{other:?}").into_bytes())),
        };
        attrs.insert(format!("header type {name}"), kind.to_owned());
        headers.push((name.to_string(), bytes));
    }
    Msg {
        key: None,
        value: Some(d.data.clone()),
        headers,
        lines: Vec::new(),
        attrs,
    }
}

/// One request as the capture server read it off the socket.
#[derive(Clone)]
struct Captured {
    method: String,
    path: String,
    /// Names as sent, in order.
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// An HTTP receiver that keeps each request as it came over the wire
/// (header names' case and order included, which hyper's server does not
/// keep) and answers `200` with an empty body, HTTP/1.1 keep-alive. The
/// JDK client's `h2c` upgrade offer is not taken: it goes on in HTTP/1.1.
struct Capture {
    port: u16,
    got: Arc<std::sync::Mutex<Vec<Captured>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Capture {
    async fn start() -> Result<Capture, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind the HTTP capture server: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let shared = Arc::clone(&got);
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(capture_connection(stream, Arc::clone(&shared)));
            }
        });
        Ok(Capture { port, got, accept })
    }

    /// Every request so far, by `METHOD path`, in arrival order.
    fn read(&self) -> Destinations {
        let mut out = Destinations::new();
        for c in self.got.lock().expect("capture").iter() {
            out.entry(format!("{} {}", c.method, c.path))
                .or_default()
                .push(http_msg(c));
        }
        out
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Reads requests (a head, then `Content-Length` bytes) off one
/// connection and answers each 200.
async fn capture_connection(
    mut stream: tokio::net::TcpStream,
    got: Arc<std::sync::Mutex<Vec<Captured>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or_default().split(' ');
        let (method, path) = (
            first.next().unwrap_or_default(),
            first.next().unwrap_or_default(),
        );
        let headers: Vec<(String, Vec<u8>)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.to_owned(), v.trim_start().as_bytes().to_vec()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buf[end + 4..end + 4 + length].to_vec();
        buf.drain(..end + 4 + length);
        got.lock().expect("capture").push(Captured {
            method: method.to_owned(),
            path: path.to_owned(),
            headers,
            body,
        });
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        if stream.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// HTTP headers that are the client's own, not the record's: compared one
/// by one as attributes (`http <name>`), so that each difference shows
/// apart. `host` carries the receiver's port, which differs: masked.
const HTTP_TRANSPORT: &[&str] = &[
    "host",
    "user-agent",
    "connection",
    "upgrade",
    "http2-settings",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

/// `authentication.webhook.secret` of the runs that sign (Standard
/// Webhooks): `whsec_` + base64 of these 32 bytes.
const WEBHOOK_KEY: &[u8] = b"walrelay-side-by-side-secret-32b";

/// Standard Webhooks' headers, comparable: the id's UUID masked (Debezium
/// Server's is random, walrelay's the event id), a timestamp within ten
/// minutes of now as `<now>`, and a signature that verifies (`v1,` +
/// base64 of HMAC-SHA256 of `<id>.<timestamp>.<body>` under
/// [`WEBHOOK_KEY`]) as `v1,<valid>`; anything else as sent.
fn webhook_attrs(c: &Captured, attrs: &mut BTreeMap<String, String>) {
    let get = |name: &str| {
        c.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    let (Some(id), Some(ts), Some(sig)) = (
        get("webhook-id"),
        get("webhook-timestamp"),
        get("webhook-signature"),
    ) else {
        return;
    };
    let masked = mask_uuid(&Some(id.clone().into_bytes())).unwrap_or_default();
    attrs.insert("http webhook-id".to_owned(), masked);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if ts.parse::<u64>().is_ok_and(|t| t.abs_diff(now) < 600) {
        attrs.insert("http webhook-timestamp".to_owned(), "<now>".to_owned());
    }
    let mut signed = format!("{id}.{ts}.").into_bytes();
    signed.extend_from_slice(&c.body);
    let expected = openssl::pkey::PKey::hmac(WEBHOOK_KEY)
        .and_then(|key| {
            let mut signer =
                openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &key)?;
            signer.update(&signed)?;
            signer.sign_to_vec()
        })
        .map(|mac| format!("v1,{}", openssl::base64::encode_block(&mac)));
    if expected.is_ok_and(|e| e == sig) {
        attrs.insert("http webhook-signature".to_owned(), "v1,<valid>".to_owned());
    }
}

/// A request as a [`Msg`]: the body as the value, headers by lower-case
/// name (the client's own apart, see [`HTTP_TRANSPORT`]), and the names as
/// sent (their case) as the attribute `header names as sent`.
fn http_msg(c: &Captured) -> Msg {
    let mut m = Msg {
        value: Some(c.body.clone()),
        ..Msg::default()
    };
    let mut sent = Vec::new();
    for (name, value) in &c.headers {
        let lower = name.to_ascii_lowercase();
        if HTTP_TRANSPORT.contains(&lower.as_str()) {
            let mut v = String::from_utf8_lossy(value).into_owned();
            if lower == "host" {
                v = v.split(':').next().unwrap_or_default().to_owned() + ":<port>";
            }
            m.attrs.insert(format!("http {lower}"), v);
        } else {
            sent.push(name.clone());
            m.headers.push((lower, Some(value.clone())));
        }
    }
    sent.sort_by_key(|n| n.to_ascii_lowercase());
    m.attrs
        .insert("header names as sent".to_owned(), sent.join(","));
    webhook_attrs(c, &mut m.attrs);
    m
}

/// The event id in Debezium's `id` header: its JSON envelope's payload, or
/// the JSON value itself (headers without schemas).
fn event_id_of(header: &[u8]) -> Option<String> {
    use serde_json::Value;
    let v: Value = serde_json::from_slice(header).ok()?;
    let v = match v {
        Value::Object(mut m) if m.contains_key("payload") => m.remove("payload")?,
        other => other,
    };
    match v {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// walrelay's messages with `Nats-Msg-Id` taken out, each with the id it
/// carried.
fn take_msg_ids(wr: &mut Destinations) -> BTreeMap<(String, usize), Option<Vec<u8>>> {
    let mut ids = BTreeMap::new();
    for (dest, msgs) in wr.iter_mut() {
        for (i, m) in msgs.iter_mut().enumerate() {
            let id = m
                .headers
                .iter()
                .position(|(n, _)| n == NATS_MSG_ID)
                .map(|p| m.headers.remove(p).1)
                .unwrap_or_default();
            m.lines
                .retain(|l| !l.starts_with(format!("{NATS_MSG_ID}:").as_bytes()));
            ids.insert((dest.clone(), i), id);
        }
    }
    ids
}

/// A header's value for comparing: the run id's UUID masked.
fn comparable(name: &str, value: &Option<Vec<u8>>) -> Option<Vec<u8>> {
    let http_run_id = name
        .to_ascii_lowercase()
        .strip_suffix(&RUN_ID.to_ascii_lowercase())
        .is_some_and(|prefix| !prefix.is_empty());
    if name.eq_ignore_ascii_case(RUN_ID) {
        mask_uuid(value).map(String::into_bytes)
    } else if http_run_id {
        // HTTP: `X-DEBEZIUM-__DEBEZIUM.CONTEXT.RUNID`, base64 of the JSON.
        let decoded = value
            .as_deref()
            .and_then(|v| base64_decode(std::str::from_utf8(v).ok()?).ok());
        mask_uuid(&decoded.or_else(|| value.clone())).map(String::into_bytes)
    } else {
        value.clone()
    }
}

/// The header lines, sorted (their order is the `header order` diff's),
/// the run id masked.
fn comparable_lines(m: &Msg) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = m
        .lines
        .iter()
        .map(|l| {
            if l.starts_with(RUN_ID.as_bytes()) {
                mask_uuid(&Some(l.clone())).map_or_else(Vec::new, String::into_bytes)
            } else {
                l.clone()
            }
        })
        .collect();
    lines.sort();
    lines
}

fn compare_msg(at: &str, a: &Msg, b: &Msg, diffs: &mut Vec<Diff>) {
    if a.key != b.key {
        diffs.push(Diff::new(at, "key", a.key.as_deref(), b.key.as_deref()));
    }
    if a.value != b.value {
        diffs.push(Diff::new(
            at,
            "value",
            a.value.as_deref(),
            b.value.as_deref(),
        ));
    }
    let attrs: BTreeSet<&String> = a.attrs.keys().chain(b.attrs.keys()).collect();
    for name in attrs {
        let (va, vb) = (a.attrs.get(name), b.attrs.get(name));
        if va != vb {
            diffs.push(Diff::new(
                at,
                name,
                va.map(String::as_bytes),
                vb.map(String::as_bytes),
            ));
        }
    }
    let names = |m: &Msg| m.headers.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
    let (na, nb) = (names(a), names(b));
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    if sorted(na.clone()) != sorted(nb.clone()) {
        diffs.push(Diff::fact(at, "header names", &na.join(","), &nb.join(",")));
        return;
    }
    if na != nb {
        // Kept apart from the values: the order is a difference of its own
        // (Java HashMap order on Debezium's side).
        diffs.push(Diff::fact(at, "header order", &na.join(","), &nb.join(",")));
    }
    // Pair each of a's headers with the same name's same occurrence in b.
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, va) in &a.headers {
        let k = seen.entry(name).or_default();
        let vb = b
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .nth(*k)
            .map(|h| &h.1);
        *k += 1;
        let vb = vb.cloned().flatten();
        if comparable(name, va) != comparable(name, &vb) {
            diffs.push(Diff::new(
                at,
                &format!("header {name}"),
                va.as_deref(),
                vb.as_deref(),
            ));
        }
    }
    let (la, lb) = (comparable_lines(a), comparable_lines(b));
    if la != lb {
        let join = |ls: Vec<Vec<u8>>| ls.join(&b"\\r\\n"[..]);
        diffs.push(Diff::new(
            at,
            "header lines",
            Some(&join(la)),
            Some(&join(lb)),
        ));
    }
}

fn compare(dbz: &Read, wr: &Read, nats: bool) -> Vec<Diff> {
    let mut diffs = Vec::new();
    let mut wr_messages = wr.messages.clone();
    let ids = if nats {
        take_msg_ids(&mut wr_messages)
    } else {
        BTreeMap::new()
    };
    let empty = Vec::new();
    let dests: BTreeSet<&String> = dbz.messages.keys().chain(wr_messages.keys()).collect();
    for dest in dests {
        let d = dbz.messages.get(dest).unwrap_or(&empty);
        let w = wr_messages.get(dest).unwrap_or(&empty);
        if d.len() != w.len() {
            diffs.push(Diff::fact(
                dest,
                "record count",
                &d.len().to_string(),
                &w.len().to_string(),
            ));
        }
        for (i, (a, b)) in d.iter().zip(w).enumerate() {
            let at = format!("{dest}#{i}");
            compare_msg(&at, a, b, &mut diffs);
            if nats {
                let want = a.header("id").and_then(event_id_of);
                let got = ids.get(&(dest.clone(), i)).cloned().flatten();
                if want.is_none() || got.as_deref() != want.as_deref().map(str::as_bytes) {
                    diffs.push(Diff::new(
                        &at,
                        NATS_MSG_ID,
                        Some(want.as_deref().unwrap_or("<the event id>").as_bytes()),
                        got.as_deref(),
                    ));
                }
            }
        }
        for (i, m) in d.iter().enumerate().skip(w.len()) {
            diffs.push(Diff::new(
                &format!("{dest}#{i}"),
                "missing in walrelay",
                m.value.as_deref(),
                None,
            ));
        }
        for (i, m) in w.iter().enumerate().skip(d.len()) {
            diffs.push(Diff::new(
                &format!("{dest}#{i}"),
                "extra in walrelay",
                None,
                m.value.as_deref(),
            ));
        }
    }
    let names: BTreeSet<&String> = dbz.streams.keys().chain(wr.streams.keys()).collect();
    for name in names {
        let (a, b) = (dbz.streams.get(name), wr.streams.get(name));
        let keys: BTreeSet<String> = [a, b]
            .iter()
            .flatten()
            .filter_map(|c| c.as_object())
            .flat_map(|o| o.keys().cloned())
            .collect();
        for k in keys {
            let va = a.map(|c| c[&k].to_string());
            let vb = b.map(|c| c[&k].to_string());
            if va != vb {
                diffs.push(Diff::new(
                    &format!("stream {name}"),
                    &format!("stream {k}"),
                    va.as_deref().map(str::as_bytes),
                    vb.as_deref().map(str::as_bytes),
                ));
            }
        }
    }
    diffs
}

fn describe(d: &Destinations) -> String {
    let mut s = String::new();
    for (dest, msgs) in d {
        for (i, m) in msgs.iter().enumerate() {
            let _ = writeln!(
                s,
                "  {dest}#{i} key={} value={} headers={:?} attrs={:?}",
                show(&m.key),
                show(&m.value),
                m.headers
                    .iter()
                    .map(|(k, v)| format!("{k}={}", show(v)))
                    .collect::<Vec<_>>(),
                m.attrs
            );
        }
    }
    s
}

/// Debezium Server started by `debezium-server.sh run DIR`; stopped on drop
/// (and by the script's watchdog if this process dies).
struct DebeziumServer {
    dir: PathBuf,
}

impl DebeziumServer {
    /// Starts it from `DIR/application.properties` with `environment`
    /// (see [`Sink::environment`]) and waits until it streams. Blocking.
    fn start(dir: &Path, environment: &[(&str, Option<&str>)]) -> Result<DebeziumServer, String> {
        let out = script_with(&["run"], dir, environment)?;
        if !out.status.success() {
            return Err(format!(
                "debezium-server.sh run {} failed ({}):\n{}",
                dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(DebeziumServer {
            dir: dir.to_path_buf(),
        })
    }

    fn running(&self) -> bool {
        script(&["status"], &self.dir).is_ok_and(|o| o.status.success())
    }

    fn log(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// The first ERROR line of its log, or its last line.
    fn why(&self) -> String {
        let text = std::fs::read_to_string(self.log()).unwrap_or_default();
        text.lines()
            .find(|l| l.contains(" ERROR "))
            .or_else(|| text.lines().last())
            .unwrap_or("")
            .to_owned()
    }
}

impl Drop for DebeziumServer {
    fn drop(&mut self) {
        if let Err(e) = script(&["stop"], &self.dir) {
            eprintln!(
                "warning: stop Debezium Server in {}: {e}",
                self.dir.display()
            );
        }
    }
}

fn script(args: &[&str], dir: &Path) -> Result<std::process::Output, String> {
    script_with(args, dir, &[])
}

/// `debezium-server.sh ARGS DIR` with `environment` changed (`run` hands
/// it on to the JVM).
fn script_with(
    args: &[&str],
    dir: &Path,
    environment: &[(&str, Option<&str>)],
) -> Result<std::process::Output, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/debezium-server.sh");
    with_env(&mut Command::new(&path), environment)
        .args(args)
        .arg(dir)
        .env("WALRELAY_OWNER_PID", std::process::id().to_string())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))
}

/// Sets each variable of `environment` that has a value and removes the
/// others.
fn with_env<'c>(command: &'c mut Command, environment: &[(&str, Option<&str>)]) -> &'c mut Command {
    for (name, value) in environment {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    command
}

/// A run's processes and database; removed on drop, panics or not.
struct Running {
    walrelay: Option<Child>,
    debezium: Option<DebeziumServer>,
    slots: Vec<String>,
    database: String,
}

impl Drop for Running {
    fn drop(&mut self) {
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
        drop(self.debezium.take());
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
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = '{slot}'"
            )) {
                eprintln!("warning: cleanup of slot {slot}: {e}");
            }
        }
        if let Err(e) = psql_c(&format!(
            "drop database if exists {} with (force)",
            self.database
        )) {
            eprintln!("warning: cleanup of database {}: {e}", self.database);
        }
    }

    /// walrelay's exit status, if it exited.
    fn walrelay_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.walrelay.as_mut()?.try_wait().ok().flatten()
    }
}

/// What one run found.
struct Outcome {
    name: &'static str,
    diffs: Vec<Diff>,
    /// The run could not be compared, or the reference misbehaved.
    error: Option<String>,
    seconds: f64,
}

async fn run_one(run: &'static Run, keep: bool) -> Outcome {
    let t0 = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&format!("walrelay-compat-server-{}-", run.name))
        .tempdir()
        .expect("create a temporary directory");
    let result = tokio::spawn(run_in(run, work.path().to_path_buf())).await;
    let (diffs, error) = match result {
        Ok(Ok(diffs)) => (diffs, None),
        Ok(Err(e)) => (Vec::new(), Some(e)),
        Err(e) => (Vec::new(), Some(format!("panicked: {e}"))),
    };
    let unexpected = diffs
        .iter()
        .any(|d| !known(run.name).iter().any(|k| k.matches(run.name, d)));
    if keep || error.is_some() || unexpected {
        let kept = work.keep();
        eprintln!("{}: files and logs kept in {}", run.name, kept.display());
    }
    Outcome {
        name: run.name,
        diffs,
        error,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

/// The SQL of every case (`file` picks the DDL or the feed), `@TABLE@` being
/// the case's table.
fn cases_sql(run: &Run, file: impl Fn(&Case) -> Option<&'static str>) -> String {
    let mut sql = String::new();
    for c in run.cases {
        if let Some(f) = file(c) {
            let table = c.name.replace('-', "_");
            sql.push_str(&substitute(
                &file_text(&server_dir().join(f)),
                &[("@TABLE@", table.as_str())],
            ));
            sql.push('\n');
        }
    }
    sql
}

/// Runs the SQL text through psql in `database`.
fn psql_text(database: &str, work: &Path, name: &str, sql: &str) -> Result<(), String> {
    let path = work.join(name);
    std::fs::write(&path, sql).map_err(|e| format!("write {}: {e}", path.display()))?;
    psql_in(database, &[OsStr::new("-f"), path.as_os_str()]).map(drop)
}

async fn run_in(run: &'static Run, work: PathBuf) -> Result<Vec<Diff>, String> {
    let token = unique_name(&run.name.replace('-', "_"));
    let (slot_d, slot_w) = (format!("{token}_d"), format!("{token}_w"));
    let (dbz_dir, wr_dir) = (work.join("debezium"), work.join("walrelay"));
    let (dbz_broker, wr_broker) = start_servers(run).await?;
    let template = file_text(&server_dir().join(run.name).join("application.properties"));
    for (dir, slot, broker) in [
        (&dbz_dir, &slot_d, &dbz_broker),
        (&wr_dir, &slot_w, &wr_broker),
    ] {
        let vars = [
            ("@PGPORT@", env().pg_port.to_string()),
            ("@DB@", token.clone()),
            ("@SLOT@", slot.clone()),
            ("@SERVER@", run.sink.address(broker)),
            ("@PORT@", broker.port.to_string()),
            ("@VHOST@", broker.vhost.clone()),
            (
                "@QUEUE_URL@",
                broker
                    .sqs
                    .as_ref()
                    .map(|q| q.url.clone())
                    .unwrap_or_default(),
            ),
            ("@TOPIC_ARN@", broker.topic_arn.clone().unwrap_or_default()),
        ];
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(
            dir.join("application.properties"),
            substitute(&template, &vars),
        )
        .expect("write application.properties");
    }
    let mut running = Running {
        walrelay: None,
        debezium: None,
        slots: vec![slot_d, slot_w.clone()],
        database: token.clone(),
    };
    psql_c(&format!("create database {token}"))?;
    psql_text(&token, &work, "setup.sql", &cases_sql(run, |c| c.table))?;
    let mut notes = Vec::new();
    start_both(&mut running, &dbz_dir, &wr_dir, run.sink).await?;
    let wr_log = wr_dir.join("walrelay.log");
    let wr_alive = wait_walrelay(&mut running, &wr_log, &slot_w, &mut notes).await?;

    psql_text(&token, &work, "feed.sql", &cases_sql(run, |c| Some(c.feed)))?;
    let expected: usize = run.cases.iter().map(|c| c.records).sum();
    let brokers = (&dbz_broker, &wr_broker);
    wait_published(run, &mut running, expected, brokers, wr_alive, &mut notes).await?;
    if let Some(fatal) = &run.fatal {
        fatal_step(
            run,
            fatal,
            &token,
            &work,
            &mut running,
            &mut notes,
            &wr_broker,
        )
        .await?;
    }

    let dbz = run.sink.read(&dbz_broker).await?;
    let wr = run.sink.read(&wr_broker).await?;
    // Read with the logs when the run's files are kept.
    for (file, read) in [("debezium/messages", &dbz), ("walrelay/messages", &wr)] {
        std::fs::write(work.join(file), describe(&read.messages)).expect("write messages");
    }
    if count(&dbz.messages) != expected {
        return Err(format!(
            "Debezium Server published {} messages, the run expects {expected} (debezium/messages)\n--- its log ---\n{}",
            count(&dbz.messages),
            tail(&dbz_dir.join("log"), 30)
        ));
    }
    notes.extend(compare(&dbz, &wr, run.sink == Sink::NatsJetStream));
    drop(running);
    drop((dbz_broker, wr_broker));
    Ok(notes)
}

/// The run's broker servers ([`Sink::servers`]). Starting them is the
/// harness's work, not what the run compares, and on the loaded machine
/// of a full suite it can fail for reasons of its own (an Erlang VM still
/// booting when `rabbitmqctl` asks it, a free port taken meanwhile): a
/// failed start is printed and tried once more on new servers.
async fn start_servers(run: &Run) -> Result<(BrokerServer, BrokerServer), String> {
    match run.sink.servers(run).await {
        Ok(pair) => Ok(pair),
        Err(first) => {
            eprintln!(
                "{}: starting its broker servers failed, trying once more: {first}",
                run.name
            );
            run.sink.servers(run).await
        }
    }
}

/// Starts Debezium Server (until it streams) and walrelay at once, with
/// the sink's environments ([`Sink::debezium_environment`],
/// [`Sink::environment`]).
async fn start_both(
    running: &mut Running,
    dbz_dir: &Path,
    wr_dir: &Path,
    sink: Sink,
) -> Result<(), String> {
    let dir = dbz_dir.to_path_buf();
    let dbz_environment = sink.debezium_environment();
    let dbz_start =
        tokio::task::spawn_blocking(move || DebeziumServer::start(&dir, &dbz_environment));
    let log = std::fs::File::create(wr_dir.join("walrelay.log")).expect("walrelay log");
    let spawned = with_env(
        &mut Command::new(env!("CARGO_BIN_EXE_walrelay")),
        sink.environment(),
    )
    .current_dir(wr_dir)
    .args(["--metrics-addr", "127.0.0.1:0"])
    .args(["run", "--config", "application.properties"])
    .env("WALRELAY_LOG", "info")
    .stdin(Stdio::null())
    .stdout(log.try_clone().expect("log fd"))
    .stderr(log)
    .spawn()
    .map_err(|e| format!("spawn walrelay: {e}"));
    // Awaited before anything can fail, so the drop guard stops it.
    let started = dbz_start
        .await
        .map_err(|e| format!("starting Debezium Server panicked: {e}"));
    running.walrelay = Some(spawned?);
    running.debezium = Some(started??);
    Ok(())
}

/// Waits (bounded) until Debezium Server published `expected` messages
/// and walrelay as many (or stopped: noted), then a second for extras;
/// Debezium Server exiting is an error.
async fn wait_published(
    run: &Run,
    running: &mut Running,
    expected: usize,
    (dbz_broker, wr_broker): (&BrokerServer, &BrokerServer),
    mut wr_alive: bool,
    notes: &mut Vec<Diff>,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = run.sink.published(dbz_broker).await?;
        let w = run.sink.published(wr_broker).await?;
        if d >= expected && (w >= expected || !wr_alive) {
            break;
        }
        if wr_alive {
            if let Some(status) = running.walrelay_exit() {
                let status = format!("exited with {status}");
                notes.push(Diff::fact("run", "stop", "kept running", &status));
                wr_alive = false;
            }
        }
        let dbz = running.debezium.as_ref().expect("started");
        if !dbz.running() {
            return Err(format!(
                "Debezium Server exited with {d} of {expected} messages published: {}\n{}",
                dbz.why(),
                tail(&dbz.log(), 30)
            ));
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

/// Waits until walrelay streams from `slot`; false (and a note) if it
/// exited first: its refusal is a difference, not an error.
async fn wait_walrelay(
    running: &mut Running,
    log: &Path,
    slot: &str,
    notes: &mut Vec<Diff>,
) -> Result<bool, String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text
            .lines()
            .any(|l| l.contains(" streaming ") && l.contains(slot))
        {
            return Ok(true);
        }
        if let Some(status) = running.walrelay_exit() {
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
            return Ok(false);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "walrelay not streaming after 120 s:\n{}",
                tail(log, 30)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes the fatal record and waits until Debezium Server has exited and
/// walrelay either published it or stopped; notes how each ended.
async fn fatal_step(
    run: &Run,
    fatal: &Fatal,
    database: &str,
    work: &Path,
    running: &mut Running,
    notes: &mut Vec<Diff>,
    wr_broker: &BrokerServer,
) -> Result<(), String> {
    let before = run.sink.published(wr_broker).await?;
    let sql = substitute(
        &file_text(&server_dir().join(fatal.feed)),
        &[("@TABLE@", fatal.case.replace('-', "_").as_str())],
    );
    psql_text(database, work, "fatal.sql", &sql)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut dbz_stopped, mut wr_exit, mut wr_published) = (false, None, false);
    while Instant::now() < deadline && !(dbz_stopped && (wr_exit.is_some() || wr_published)) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        dbz_stopped = dbz_stopped || !running.debezium.as_ref().expect("started").running();
        wr_exit = wr_exit.or_else(|| running.walrelay_exit());
        wr_published = run.sink.published(wr_broker).await? > before;
    }
    let dbz = running.debezium.as_ref().expect("started");
    if !dbz_stopped {
        return Err(format!(
            "Debezium Server kept running after the fatal record ({}): the reference changed?\n{}",
            fatal.feed,
            tail(&dbz.log(), 30)
        ));
    }
    let wr = match (wr_exit, wr_published) {
        (Some(status), _) => format!("exited with {status}"),
        (None, true) => "published it and kept running".to_owned(),
        (None, false) => "kept running".to_owned(),
    };
    notes.push(Diff::fact(
        "run",
        "fatal record",
        &format!("exited: {}", dbz.why()),
        &wr,
    ));
    Ok(())
}

/// True once a Debezium Server AOT cache exists (some earlier start
/// stopped cleanly and left it).
fn aot_cache_exists() -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/debezium-server/aot");
    std::fs::read_dir(root).is_ok_and(|dirs| {
        dirs.flatten()
            .any(|d| d.path().join("server.aot").is_file())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_server_and_walrelay_publish_identical_messages() {
    check_tables();
    let only: Option<HashSet<String>> = std::env::var("WALRELAY_COMPAT_SERVER_RUNS")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.split(',').map(|c| c.trim().to_string()).collect());
    for name in only.iter().flatten() {
        assert!(
            RUNS.iter().any(|r| r.name == name),
            "WALRELAY_COMPAT_SERVER_RUNS names an unknown run {name}"
        );
    }
    let selected: Vec<&'static Run> = RUNS
        .iter()
        .filter(|r| only.as_ref().is_none_or(|o| o.contains(r.name)))
        .collect();
    let keep = std::env::var("WALRELAY_COMPAT_KEEP").is_ok_and(|v| v == "1");
    let parallel: usize = std::env::var("WALRELAY_COMPAT_PARALLEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .max(1);
    let t0 = Instant::now();
    let outcomes = run_all(&selected, parallel, keep).await;
    eprintln!(
        "--- {} run(s) in {:.0} s, {parallel} at a time ---",
        outcomes.len(),
        t0.elapsed().as_secs_f64()
    );
    let failures = judge(&outcomes);
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The tables are consistent: names unique, files present, every known
/// difference about a run.
fn check_tables() {
    let names: HashSet<&str> = RUNS.iter().map(|r| r.name).collect();
    assert_eq!(names.len(), RUNS.len(), "two RUNS share a name");
    for r in RUNS {
        let dir = server_dir().join(r.name);
        assert!(
            dir.join("application.properties").exists(),
            "run {} has no tests/compat/server/{}/application.properties",
            r.name,
            r.name
        );
        let cases: HashSet<&str> = r.cases.iter().map(|c| c.name).collect();
        assert_eq!(
            cases.len(),
            r.cases.len(),
            "run {}: two cases share a name",
            r.name
        );
        let files = r
            .cases
            .iter()
            .flat_map(|c| [c.table, Some(c.feed)])
            .flatten();
        for f in files.chain(r.fatal.as_ref().map(|f| f.feed)) {
            assert!(
                server_dir().join(f).exists(),
                "run {}: no tests/compat/server/{f}",
                r.name
            );
        }
    }
    for k in KNOWN_DIFFERENCES {
        assert!(
            names.contains(k.case),
            "KNOWN_DIFFERENCES names an unknown run {}",
            k.case
        );
    }
}

/// Runs `runs`, `parallel` at a time; outcomes in the order of `runs`.
async fn run_all(runs: &[&'static Run], parallel: usize, keep: bool) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut rest = runs;
    // Without an AOT cache every start would train one (slower, and its
    // stop writes 75 MB): the first run goes alone and leaves it.
    if !aot_cache_exists() {
        if let Some((first, others)) = rest.split_first() {
            eprintln!(
                "no Debezium Server AOT cache yet: {} runs alone first",
                first.name
            );
            outcomes.push(report(run_one(first, keep).await));
            rest = others;
        }
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, run) in rest.iter().copied().enumerate() {
        let gate = gate.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire().await.expect("semaphore open");
            (i, report(run_one(run, keep).await))
        });
    }
    let mut joined: Vec<(usize, Outcome)> = Vec::new();
    while let Some(j) = tasks.join_next().await {
        joined.push(j.expect("run task"));
    }
    joined.sort_by_key(|(i, _)| *i);
    outcomes.extend(joined.into_iter().map(|(_, o)| o));
    outcomes
}

fn report(o: Outcome) -> Outcome {
    eprintln!(
        "{}: {} ({:.0} s)",
        o.name,
        match (&o.error, o.diffs.len()) {
            (Some(e), _) => format!("ERROR: {e}"),
            (None, 0) => "identical".to_string(),
            (None, n) => format!("{n} difference(s)"),
        },
        o.seconds
    );
    o
}

/// Prints the known differences by run and field (header order apart),
/// and returns the failures: errors, differences not in
/// [`KNOWN_DIFFERENCES`], entries whose difference is gone.
fn judge(outcomes: &[Outcome]) -> Vec<String> {
    let mut failures = Vec::new();
    let (mut known_text, mut order_text) = (String::new(), String::new());
    for o in outcomes {
        if let Some(e) = &o.error {
            failures.push(format!("{}: could not be compared: {e}", o.name));
            continue;
        }
        let known = known(o.name);
        for k in &known {
            let shown: Vec<&Diff> = o.diffs.iter().filter(|d| k.matches(o.name, d)).collect();
            let out = if k.field == "header order" {
                &mut order_text
            } else {
                &mut known_text
            };
            match shown.first() {
                Some(first) => {
                    let mut example = first.to_string();
                    if example.len() > 600 {
                        let cut = (0..=600).rev().find(|&i| example.is_char_boundary(i));
                        example.truncate(cut.unwrap_or(0));
                        example.push_str(" ...");
                    }
                    let _ = writeln!(
                        out,
                        "{}: {} x{} ({}), e.g. {example}",
                        o.name,
                        k.field,
                        shown.len(),
                        k.reason
                    );
                }
                None if k.intermittent => {
                    let _ = writeln!(out, "{}: {}: did not show this time ({})", o.name, k.field, k.reason);
                }
                None => failures.push(format!(
                    "{}: KNOWN_DIFFERENCES lists a {} difference (debezium has {:?}, walrelay {:?}: {}) that is gone: remove the entry",
                    o.name, k.field, k.debezium, k.walrelay, k.reason
                )),
            }
        }
        for d in &o.diffs {
            if !known.iter().any(|k| k.matches(o.name, d)) {
                failures.push(format!("{}: {d}", o.name));
            }
        }
    }
    eprintln!("--- known differences ---\n{known_text}");
    if !order_text.is_empty() {
        eprintln!("--- known header order differences ---\n{order_text}");
    }
    failures
}

#[test]
fn nats_header_blocks_and_base64_are_read_as_sent() {
    let (headers, lines) = nats_headers(b"NATS/1.0\r\nid:{\"a\":1}\r\nNats-Msg-Id: x y\r\n\r\n");
    assert_eq!(
        headers,
        [
            ("id".to_owned(), Some(b"{\"a\":1}".to_vec())),
            ("Nats-Msg-Id".to_owned(), Some(b"x y".to_vec())),
        ]
    );
    assert_eq!(
        lines,
        [b"id:{\"a\":1}".to_vec(), b"Nats-Msg-Id: x y".to_vec()]
    );
    assert_eq!(base64_decode("aMOpbGxv").unwrap(), "héllo".as_bytes());
    assert_eq!(base64_decode("YQ==").unwrap(), b"a");
    assert_eq!(base64_decode("YWI=").unwrap(), b"ab");
    assert_eq!(base64_decode("").unwrap(), b"");
    assert!(base64_decode("a-b").is_err());
    assert_eq!(
        event_id_of(br#"{"schema":{"type":"string"},"payload":"e1"}"#).as_deref(),
        Some("e1")
    );
    assert_eq!(event_id_of(br#""e2""#).as_deref(), Some("e2"));
    assert_eq!(event_id_of(br#"{"payload":11}"#).as_deref(), Some("11"));
}
