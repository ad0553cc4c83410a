//! The chain as configured: the native TOML's `[[transforms]]` and
//! `[[predicates]]` (the Kafka Connect forms are translated into the
//! same), with Kafka's class names or their short forms (`RegexRouter`,
//! `Cast$Value`, `TopicNameMatches`), built into a [`Chain`]. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use super::options::{Options, TransformConfigError};
use super::{build_chain, Chain, Predicate, StepConfig};

/// Kafka's transforms package, which a short class name is in.
const KAFKA_TRANSFORMS: &str = "org.apache.kafka.connect.transforms.";
/// Kafka's predicates package.
const KAFKA_PREDICATES: &str = "org.apache.kafka.connect.transforms.predicates.";

/// An option's value as TOML writes it; Connect reads every option from
/// its text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum OptionValue {
    /// `true`/`false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text.
    Text(String),
    /// A list (Connect's `LIST`: comma-separated).
    List(Vec<OptionValue>),
}

impl OptionValue {
    /// The text Connect would read.
    pub fn text(&self) -> String {
        match self {
            OptionValue::Bool(b) => b.to_string(),
            OptionValue::Int(i) => i.to_string(),
            OptionValue::Float(f) => crate::connect::java::double_to_string(*f),
            OptionValue::Text(s) => s.clone(),
            OptionValue::List(items) => items
                .iter()
                .map(OptionValue::text)
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// One `[[transforms]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TransformSpec {
    /// The alias (`transforms=<name>`).
    pub name: String,
    /// The class, or its short name in Kafka's package.
    #[serde(rename = "type")]
    pub class: String,
    /// The name of a `[[predicates]]` entry.
    #[serde(default)]
    pub predicate: Option<String>,
    /// Applies the transform where the predicate is false.
    #[serde(default)]
    pub negate: Option<bool>,
    /// The transform's options, named as Connect names them.
    #[serde(flatten)]
    pub options: BTreeMap<String, OptionValue>,
}

/// One `[[predicates]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PredicateSpec {
    /// The alias (`predicates=<name>`).
    pub name: String,
    /// The class, or its short name in Kafka's predicates package.
    #[serde(rename = "type")]
    pub class: String,
    /// Its options.
    #[serde(flatten)]
    pub options: BTreeMap<String, OptionValue>,
}

/// A chain configuration walrelay refuses, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct SpecError {
    /// `transforms.<name>.<option>` or `predicates.<name>.<option>`.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// The full class a configured name stands for.
pub fn full_class(class: &str, package: &str) -> String {
    let class = class.trim();
    if class.contains('.') {
        class.to_owned()
    } else {
        format!("{package}{class}")
    }
}

/// The full transform class of `class` (a short name is Kafka's).
pub fn transform_class(class: &str) -> String {
    full_class(class, KAFKA_TRANSFORMS)
}

fn options_of(map: &BTreeMap<String, OptionValue>) -> Options {
    Options(map.iter().map(|(k, v)| (k.clone(), v.text())).collect())
}

/// Builds the chain; returns it and the options no transform read, as
/// `transforms.<name>.<option>` keys (Connect ignores them).
pub fn build(
    transforms: &[TransformSpec],
    predicates: &[PredicateSpec],
) -> Result<(Chain, Vec<String>), SpecError> {
    let mut built: BTreeMap<&str, Arc<Predicate>> = BTreeMap::new();
    for p in predicates {
        if built.contains_key(p.name.as_str()) {
            return Err(SpecError {
                key: format!("predicates.{}", p.name),
                reason: "defined twice".to_owned(),
            });
        }
        let class = full_class(&p.class, KAFKA_PREDICATES);
        let predicate = Predicate::build(&class, &options_of(&p.options))
            .map_err(|e| spec_error(&format!("predicates.{}", p.name), &e, &class))?;
        built.insert(&p.name, Arc::new(predicate));
    }
    let mut steps = Vec::with_capacity(transforms.len());
    for t in transforms {
        let prefix = format!("transforms.{}", t.name);
        if steps.iter().any(|s: &StepConfig| s.alias == t.name) {
            return Err(SpecError {
                key: prefix,
                reason: "defined twice".to_owned(),
            });
        }
        let condition = match (&t.predicate, t.negate) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(SpecError {
                    key: format!("{prefix}.negate"),
                    reason: format!(
                        "there is no {prefix}.predicate to negate (Kafka Connect refuses it too)"
                    ),
                })
            }
            (Some(p), negate) => {
                let Some(predicate) = built.get(p.trim()) else {
                    return Err(SpecError {
                        key: format!("{prefix}.predicate"),
                        reason: format!("names {p:?}, which is not a configured predicate"),
                    });
                };
                Some((Arc::clone(predicate), negate.unwrap_or(false)))
            }
        };
        steps.push(StepConfig {
            alias: t.name.clone(),
            class: transform_class(&t.class),
            options: options_of(&t.options),
            condition,
        });
    }
    let (chain, unused) = build_chain(steps).map_err(|e| {
        let class = transforms
            .iter()
            .find(|t| t.name == e.alias)
            .map(|t| transform_class(&t.class))
            .unwrap_or_default();
        spec_error(&format!("transforms.{}", e.alias), &e.source, &class)
    })?;
    let unused = unused
        .into_iter()
        .flat_map(|(alias, keys)| {
            keys.into_iter()
                .map(move |k| format!("transforms.{alias}.{k}"))
        })
        .collect();
    Ok((chain, unused))
}

fn spec_error(prefix: &str, e: &TransformConfigError, class: &str) -> SpecError {
    match e {
        TransformConfigError::UnknownClass(_) => SpecError {
            key: format!("{prefix}.type"),
            reason: format!("walrelay does not run {class} after the router"),
        },
        other => SpecError {
            key: match other.key() {
                Some(k) => format!("{prefix}.{k}"),
                None => prefix.to_owned(),
            },
            reason: other.to_string(),
        },
    }
}
