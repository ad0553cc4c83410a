//! Kafka Connect's single message transforms after the EventRouter: the
//! record as Connect's `SourceRecord` holds it ([`ConnectRecord`]: topic,
//! partition, key and value each with its schema, timestamp, headers with
//! schemas), the transforms of `org.apache.kafka.connect.transforms` and
//! Debezium's that apply to outbox records, Connect's three predicates,
//! and the chain that applies them in order as Connect's
//! `TransformationChain` does.
//!
//! Each transform reproduces Kafka 4.1.1's behaviour: the same records out,
//! the same schema names and versions, and the same `DataException`
//! message for a record it cannot transform. Options are read from the
//! strings a connector file holds (the native TOML is turned into the same
//! strings), with Connect's `ConfigDef` parsing rules.
//!
//! Pure: never does I/O or logs.

mod cast;
pub mod config;
mod debezium;
mod fields;
mod flatten;
mod headers;
pub mod options;
pub mod predicate;
mod routing;
mod schema_meta;
mod timestamp;
pub(super) mod util;

use std::fmt;
use std::sync::Arc;

pub use self::options::{Options, TransformConfigError};
pub use self::predicate::Predicate;
use super::{Schema, Value};

/// A Connect header: a name, a schema (none for a schemaless header) and
/// a value; the header converter serialises it after the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectHeader {
    /// Header name.
    pub key: Arc<str>,
    /// Its schema.
    pub schema: Option<Arc<Schema>>,
    /// Its value.
    pub value: Value,
}

/// A source record between the router and the converters.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectRecord {
    /// Destination topic.
    pub topic: Arc<str>,
    /// Explicit partition.
    pub partition: Option<i32>,
    /// Key schema (`None`: schemaless).
    pub key_schema: Option<Arc<Schema>>,
    /// Key (`Value::Null`: a null key).
    pub key: Value,
    /// Value schema (`None`: schemaless).
    pub value_schema: Option<Arc<Schema>>,
    /// Value (`Value::Null`: a tombstone).
    pub value: Value,
    /// Timestamp, Unix ms.
    pub timestamp: Option<i64>,
    /// Headers, in order.
    pub headers: Vec<ConnectHeader>,
}

/// The key or the value: what a transform's `$Key` or `$Value` variant
/// operates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `$Key`.
    Key,
    /// `$Value`.
    Value,
}

impl Side {
    /// `operatingSchema(record)`.
    pub fn schema(self, r: &ConnectRecord) -> Option<&Arc<Schema>> {
        match self {
            Side::Key => r.key_schema.as_ref(),
            Side::Value => r.value_schema.as_ref(),
        }
    }

    /// `operatingValue(record)`.
    pub fn value(self, r: &ConnectRecord) -> &Value {
        match self {
            Side::Key => &r.key,
            Side::Value => &r.value,
        }
    }

    /// Takes the operated schema and value out of `r` (leaving null).
    pub fn take(self, r: &mut ConnectRecord) -> (Option<Arc<Schema>>, Value) {
        match self {
            Side::Key => (
                r.key_schema.take(),
                std::mem::replace(&mut r.key, Value::Null),
            ),
            Side::Value => (
                r.value_schema.take(),
                std::mem::replace(&mut r.value, Value::Null),
            ),
        }
    }

    /// `newRecord(record, updatedSchema, updatedValue)`.
    pub fn set(self, r: &mut ConnectRecord, schema: Option<Arc<Schema>>, value: Value) {
        match self {
            Side::Key => {
                r.key_schema = schema;
                r.key = value;
            }
            Side::Value => {
                r.value_schema = schema;
                r.value = value;
            }
        }
    }

    /// `$Key` or `$Value`.
    pub fn suffix(self) -> &'static str {
        match self {
            Side::Key => "$Key",
            Side::Value => "$Value",
        }
    }
}

/// A record a transform refused: Connect's `DataException` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TransformError {
    /// The exception's message, as Kafka words it.
    pub message: String,
}

impl TransformError {
    /// A `DataException(message)`.
    pub fn new(message: impl Into<String>) -> TransformError {
        TransformError {
            message: message.into(),
        }
    }
}

/// One transform: a record in, the transformed record (or none: dropped)
/// out.
pub trait Transformation: fmt::Debug + Send + Sync {
    /// `Transformation.apply(record)`.
    fn apply(&self, record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError>;
}

/// A transform that failed on a record: which one, and Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transform {alias} ({class}) failed: {source}")]
pub struct StepError {
    /// The transform's alias (`transforms=<alias>`).
    pub alias: String,
    /// Its class.
    pub class: String,
    /// What it said.
    #[source]
    pub source: TransformError,
}

/// A transform of the chain with its alias, class and condition.
#[derive(Debug)]
struct Step {
    alias: String,
    class: String,
    transform: Box<dyn Transformation>,
    /// `predicate` and `negate`.
    condition: Option<(Arc<Predicate>, bool)>,
}

/// Connect's `TransformationChain`: the transforms in order, each applied
/// when `negate ^ predicate.test(record)`; a transform that returns no
/// record ends the chain for it.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    steps: Arc<Vec<Step>>,
}

impl Chain {
    /// Whether the chain has no transform (the router's output goes
    /// straight to the converters).
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The transforms' aliases and classes, in order.
    pub fn describe(&self) -> Vec<(&str, &str)> {
        self.steps
            .iter()
            .map(|s| (s.alias.as_str(), s.class.as_str()))
            .collect()
    }

    /// Applies every transform in order; `None` when one dropped the record.
    pub fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, StepError> {
        for step in self.steps.iter() {
            if let Some((predicate, negate)) = &step.condition {
                if !(*negate ^ predicate.test(&record)) {
                    continue;
                }
            }
            match step.transform.apply(record) {
                Ok(Some(r)) => record = r,
                Ok(None) => return Ok(None),
                Err(source) => {
                    return Err(StepError {
                        alias: step.alias.clone(),
                        class: step.class.clone(),
                        source,
                    })
                }
            }
        }
        Ok(Some(record))
    }
}

/// One transform as configured: alias, class, options (every option but
/// `type`, `predicate` and `negate`), and its condition.
#[derive(Debug, Clone)]
pub struct StepConfig {
    /// `transforms=<alias>`.
    pub alias: String,
    /// `transforms.<alias>.type`.
    pub class: String,
    /// The other `transforms.<alias>.*` options.
    pub options: Options,
    /// `transforms.<alias>.predicate`'s predicate and `negate`.
    pub condition: Option<(Arc<Predicate>, bool)>,
}

/// A configuration problem in one transform of the chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transform {alias}: {source}")]
pub struct ChainConfigError {
    /// The transform's alias.
    pub alias: String,
    /// What is wrong, naming the option.
    #[source]
    pub source: TransformConfigError,
}

/// Per transform alias, the options it did not read.
pub type Unused = Vec<(String, Vec<String>)>;

/// Builds the chain; returns it and, per transform, the options it did
/// not read (Connect ignores those).
pub fn build_chain(steps: Vec<StepConfig>) -> Result<(Chain, Unused), ChainConfigError> {
    let mut built = Vec::with_capacity(steps.len());
    let mut unused = Vec::new();
    for s in steps {
        let mut opts = s.options.reader();
        let transform = build(&s.class, &mut opts).map_err(|source| ChainConfigError {
            alias: s.alias.clone(),
            source,
        })?;
        let left = opts.unused();
        if !left.is_empty() {
            unused.push((s.alias.clone(), left));
        }
        built.push(Step {
            alias: s.alias,
            class: s.class,
            transform,
            condition: s.condition,
        });
    }
    Ok((
        Chain {
            steps: Arc::new(built),
        },
        unused,
    ))
}

/// What a module's `build` gives for a class it knows.
type Built = Result<Box<dyn Transformation>, TransformConfigError>;

/// A module's builder: `None` for a class that is not its own.
type Builder = fn(&str, &options::Reader<'_>) -> Option<Built>;

/// Each module's classes and builder.
const MODULES: &[(&[&str], Builder)] = &[
    (cast::CLASSES, cast::build),
    (debezium::CLASSES, debezium::build),
    (fields::CLASSES, fields::build),
    (flatten::CLASSES, flatten::build),
    (headers::CLASSES, headers::build),
    (routing::CLASSES, routing::build),
    (schema_meta::CLASSES, schema_meta::build),
    (timestamp::CLASSES, timestamp::build),
];

/// The transform classes walrelay runs after the router.
pub fn classes() -> impl Iterator<Item = &'static str> {
    MODULES.iter().flat_map(|(c, _)| c.iter().copied())
}

/// Builds the transform of `class` from its options.
fn build(class: &str, opts: &mut options::Reader<'_>) -> Built {
    for (_, f) in MODULES {
        if let Some(b) = f(class, opts) {
            return b;
        }
    }
    Err(TransformConfigError::UnknownClass(class.to_owned()))
}
