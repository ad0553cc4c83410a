//! Connect's JSON, written the way Jackson writes each entity of
//! `org.apache.kafka.connect.runtime.rest.entities`: creator properties
//! first in the creator's order, `trace` left out when empty, no pretty
//! printing, no trailing newline.
//!
//! Owns the writers of every entity, the order of configuration maps
//! (Java `HashMap` iteration order, see [`hashmap_order`]) and the reading
//! of request bodies as Jackson reads a `Map<String, String>`.

use std::collections::BTreeMap;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::distributed::api::{
    ApiError, ConfigMap, ConnectorInfo, ConnectorOffsets, ConnectorStateInfo, PluginInfo,
    ServerInfo, State, StateInfo, TaskId, TaskInfo, TaskState,
};

/// Appends `s` as a JSON string literal.
pub(crate) fn push_str(out: &mut String, s: &str) {
    // serde_json escapes as Jackson does for everything Connect writes
    // (quotes, backslashes, control characters; not `/`, not non-ASCII).
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// Appends `"key":`.
fn push_key(out: &mut String, key: &str) {
    push_str(out, key);
    out.push(':');
}

/// Appends an optional string (`null` when absent).
fn push_opt(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => push_str(out, s),
        None => out.push_str("null"),
    }
}

/// Java's `String.hashCode` of `s` (over its UTF-16 code units).
pub(crate) fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The table size of a `java.util.HashMap` filled by `put`s with `n` keys
/// (16, doubled whenever the size passes three quarters of it).
fn hashmap_capacity(n: usize) -> usize {
    let mut capacity = 16usize;
    while n > capacity / 4 * 3 {
        capacity *= 2;
    }
    capacity
}

/// The keys in the order a `java.util.HashMap` filled with them in
/// `insertion` order iterates them: by bucket (the spread hash masked by
/// the table size), then by insertion within a bucket. That is the order
/// of every configuration map Connect reads back from its config topic.
pub(crate) fn hashmap_order<'a>(insertion: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let keys: Vec<&str> = insertion.into_iter().collect();
    let mask = hashmap_capacity(keys.len()) - 1;
    let mut indexed: Vec<(usize, usize, &str)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let h = java_string_hash(k) as u32;
            ((h ^ (h >> 16)) as usize & mask, i, *k)
        })
        .collect();
    indexed.sort_unstable();
    indexed.into_iter().map(|(_, _, k)| k).collect()
}

/// How a configuration map's keys are ordered in a response.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyOrder<'a> {
    /// A `LinkedHashMap` echoed from the request: these keys first, in
    /// this order, then the rest (e.g. `name`, which Connect appends).
    Request(&'a [String]),
    /// A `HashMap` read back from the config topic, whose keys were put in
    /// this order (keys of the map missing here come after, sorted).
    HashMap(&'a [String]),
}

/// Appends `config` as a JSON object with keys in `order`.
pub(crate) fn push_config(out: &mut String, config: &ConfigMap, order: KeyOrder<'_>) {
    let known = match order {
        KeyOrder::Request(keys) | KeyOrder::HashMap(keys) => keys,
    };
    let mut insertion: Vec<&str> = Vec::with_capacity(config.len());
    for k in known {
        if config.contains_key(k) && !insertion.contains(&k.as_str()) {
            insertion.push(k);
        }
    }
    for k in config.keys() {
        if !insertion.contains(&k.as_str()) {
            insertion.push(k);
        }
    }
    let keys = match order {
        KeyOrder::Request(_) => insertion,
        KeyOrder::HashMap(_) => hashmap_order(insertion),
    };
    out.push('{');
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_key(out, k);
        push_opt(out, config.get(*k).map(String::as_str));
    }
    out.push('}');
}

/// `ServerInfo`: `version`, `commit`, `kafka_cluster_id`.
pub(crate) fn server_info(info: &ServerInfo) -> String {
    let mut out = String::from("{\"version\":");
    push_str(&mut out, &info.version);
    out.push_str(",\"commit\":");
    push_str(&mut out, &info.commit);
    out.push_str(",\"kafka_cluster_id\":");
    push_str(&mut out, &info.kafka_cluster_id);
    out.push('}');
    out
}

/// `ConnectorTaskId`: `connector`, `task`.
fn push_task_id(out: &mut String, id: &TaskId) {
    out.push_str("{\"connector\":");
    push_str(out, &id.connector);
    out.push_str(",\"task\":");
    out.push_str(&id.task.to_string());
    out.push('}');
}

/// `ConnectorInfo`: `name`, `config`, `tasks`, `type` (`null` when
/// unknown: Jackson writes a null enum).
pub(crate) fn push_connector_info(out: &mut String, info: &ConnectorInfo, order: KeyOrder<'_>) {
    out.push_str("{\"name\":");
    push_str(out, &info.name);
    out.push_str(",\"config\":");
    push_config(out, &info.config, order);
    out.push_str(",\"tasks\":[");
    for (i, t) in info.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_task_id(out, t);
    }
    out.push_str("],\"type\":");
    push_opt(out, info.kind);
    out.push('}');
}

/// `AbstractState`'s properties after the creator's first ones:
/// `state`, `worker_id`, `version` (creator properties), then `trace`
/// (left out when empty).
fn push_state_fields(out: &mut String, s: &StateInfo, version: Option<&str>) {
    out.push_str("\"state\":");
    push_str(out, s.state.as_str());
    out.push_str(",\"worker_id\":");
    push_str(out, &s.worker_id);
    // An unassigned connector or task has no version (Connect: null).
    out.push_str(",\"version\":");
    push_opt(out, version.filter(|_| s.state != State::Unassigned));
    if let Some(trace) = s.trace.as_deref().filter(|t| !t.is_empty()) {
        out.push_str(",\"trace\":");
        push_str(out, trace);
    }
}

/// `ConnectorStateInfo.TaskState`: `id`, then the state's fields.
pub(crate) fn push_task_state(out: &mut String, t: &TaskState, version: Option<&str>) {
    out.push_str("{\"id\":");
    out.push_str(&t.id.to_string());
    out.push(',');
    push_state_fields(out, &t.info, version);
    out.push('}');
}

/// `ConnectorStateInfo`: `name`, `connector`, `tasks`, `type`; `version`
/// is the connector plugin's version, written in every state (Connect
/// 4.1 writes the version each worker reported).
pub(crate) fn push_connector_status(
    out: &mut String,
    s: &ConnectorStateInfo,
    version: Option<&str>,
) {
    out.push_str("{\"name\":");
    push_str(out, &s.name);
    out.push_str(",\"connector\":{");
    push_state_fields(out, &s.connector, version);
    out.push_str("},\"tasks\":[");
    for (i, t) in s.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_task_state(out, t, version);
    }
    out.push_str("],\"type\":");
    push_opt(out, s.kind);
    out.push('}');
}

/// `List<TaskInfo>`: `id`, `config` each.
pub(crate) fn task_infos(tasks: &[TaskInfo], order: &[String]) -> String {
    let mut out = String::from("[");
    for (i, t) in tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"id\":");
        push_task_id(&mut out, &t.id);
        out.push_str(",\"config\":");
        push_config(&mut out, &t.config, KeyOrder::HashMap(order));
        out.push('}');
    }
    out.push(']');
    out
}

/// A JSON array of strings.
pub(crate) fn string_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_str(&mut out, s.as_ref());
    }
    out.push(']');
    out
}

/// `GET /connectors/{name}/topics`: `{"<name>":{"topics":[...]}}`.
pub(crate) fn active_topics(name: &str, topics: &[String]) -> String {
    let mut out = String::from("{");
    push_key(&mut out, name);
    out.push_str("{\"topics\":");
    out.push_str(&string_list(topics));
    out.push_str("}}");
    out
}

/// `List<PluginInfo>`: `class`, `type`, `version` (left out only when
/// it is `undefined`, as Connect's `NoVersionFilter`).
pub(crate) fn plugins(list: &[PluginInfo]) -> String {
    let mut out = String::from("[");
    for (i, p) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"class\":");
        push_str(&mut out, &p.class);
        out.push_str(",\"type\":");
        push_str(&mut out, p.kind);
        if p.version.as_deref() != Some("undefined") {
            out.push_str(",\"version\":");
            push_opt(&mut out, p.version.as_deref());
        }
        out.push('}');
    }
    out.push(']');
    out
}

/// `ErrorMessage`: `error_code`, `message` (`null` when Java's message
/// would be).
pub(crate) fn error(e: &ApiError) -> String {
    let mut out = format!("{{\"error_code\":{},\"message\":", e.status);
    push_str(&mut out, &e.message);
    out.push('}');
    out
}

/// `Message`: `{"message": ...}`.
pub(crate) fn message(text: &str) -> String {
    let mut out = String::from("{\"message\":");
    push_str(&mut out, text);
    out.push('}');
    out
}

/// `ConnectorOffsets`: `{"offsets":[{"partition":...,"offset":...}]}`.
pub(crate) fn offsets(o: &ConnectorOffsets) -> String {
    let mut out = String::from("{\"offsets\":[");
    for (i, po) in o.offsets.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"partition\":");
        out.push_str(&Value::Object(po.partition.clone()).to_string());
        out.push_str(",\"offset\":");
        match &po.offset {
            Some(offset) => out.push_str(&Value::Object(offset.clone()).to_string()),
            None => out.push_str("null"),
        }
        out.push('}');
    }
    out.push_str("]}");
    out
}

/// Jackson's property order of the entities in `ConfigInfos`, by the
/// key under which each appears.
const CONFIG_INFOS_ORDER: &[&str] = &["name", "error_count", "groups", "configs"];
/// `ConfigInfo`.
const CONFIG_INFO_ORDER: &[&str] = &["definition", "value"];
/// `ConfigKeyInfo`: creator properties, then `order` (a getter whose
/// creator parameter is named `order_in_group`).
const CONFIG_KEY_ORDER: &[&str] = &[
    "name",
    "type",
    "required",
    "default_value",
    "importance",
    "documentation",
    "group",
    "width",
    "display_name",
    "dependents",
    "order",
];
/// `ConfigValueInfo`.
const CONFIG_VALUE_ORDER: &[&str] = &["name", "value", "recommended_values", "errors", "visible"];

/// Appends the object `map` with `order`'s keys first, then the rest
/// sorted; `nested` names the order of each key's object value(s).
fn push_ordered(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    order: &[&str],
    nested: &dyn Fn(&str) -> Option<&'static [&'static str]>,
) {
    let mut keys: Vec<&str> = order
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .collect();
    keys.extend(
        map.keys()
            .map(String::as_str)
            .filter(|k| !order.contains(k)),
    );
    out.push('{');
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_key(out, k);
        let v = &map[*k];
        match (nested(k), v) {
            (Some(inner), Value::Object(m)) => push_ordered(out, m, inner, &|_| None),
            (Some(inner), Value::Array(items)) if k == &"configs" => {
                out.push('[');
                for (j, item) in items.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    match item {
                        Value::Object(m) => push_ordered(out, m, inner, &config_info_nested),
                        other => out.push_str(&other.to_string()),
                    }
                }
                out.push(']');
            }
            _ => out.push_str(&v.to_string()),
        }
    }
    out.push('}');
}

/// The order inside a `ConfigInfo`'s two objects.
fn config_info_nested(key: &str) -> Option<&'static [&'static str]> {
    match key {
        "definition" => Some(CONFIG_KEY_ORDER),
        "value" => Some(CONFIG_VALUE_ORDER),
        _ => None,
    }
}

/// `ConfigInfos` (the validate answer) with Jackson's key order.
pub(crate) fn config_infos(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut out = String::new();
            push_ordered(&mut out, m, CONFIG_INFOS_ORDER, &|k| {
                (k == "configs").then_some(CONFIG_INFO_ORDER)
            });
            out
        }
        other => other.to_string(),
    }
}

/// `List<ConfigKeyInfo>` with Jackson's key order.
pub(crate) fn config_key_infos(defs: &[&serde_json::Map<String, Value>]) -> String {
    let mut out = String::from("[");
    for (i, d) in defs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_ordered(&mut out, d, CONFIG_KEY_ORDER, &|_| None);
    }
    out.push(']');
    out
}

/// A JSON object read as Jackson reads a `Map<String, String>`: keys in
/// request order (a `LinkedHashMap`: a repeated key keeps its first place
/// and its last value), scalars coerced to their text, `null` kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OrderedConfig(pub(crate) Vec<(String, Option<String>)>);

impl OrderedConfig {
    /// The value of `key` (`Some(None)`: present and `null`).
    pub(crate) fn get(&self, key: &str) -> Option<Option<&str>> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref())
    }

    /// Sets `key` (keeping its place when present, else appending).
    pub(crate) fn put(&mut self, key: &str, value: Option<String>) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key.to_owned(), value)),
        }
    }

    /// The map without its `null`s (a `null` value is no setting).
    pub(crate) fn to_config(&self) -> ConfigMap {
        self.0
            .iter()
            .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
            .collect()
    }

    /// The map as a patch (`None` removes the key).
    pub(crate) fn to_patch(&self) -> BTreeMap<String, Option<String>> {
        self.0.iter().cloned().collect()
    }
}

/// Why a scalar could not be read as a string: Jackson's words.
fn mismatched(raw: &str) -> String {
    let (what, token) = if raw.starts_with('{') {
        ("Object", "START_OBJECT")
    } else {
        ("Array", "START_ARRAY")
    };
    format!(
        "Cannot deserialize value of type `java.lang.String` from {what} value (token `JsonToken.{token}`)"
    )
}

impl<'de> serde::Deserialize<'de> for OrderedConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Reads the object's entries in order.
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<OrderedConfig, A::Error> {
                let mut out = OrderedConfig::default();
                while let Some((k, raw)) = m.next_entry::<String, Box<RawValue>>()? {
                    let raw = raw.get();
                    let value = if raw == "null" {
                        None
                    } else if raw.starts_with('"') {
                        Some(
                            serde_json::from_str::<String>(raw)
                                .map_err(serde::de::Error::custom)?,
                        )
                    } else if raw.starts_with('{') || raw.starts_with('[') {
                        return Err(serde::de::Error::custom(mismatched(raw)));
                    } else {
                        // Numbers and booleans: their text, as Jackson's
                        // StringDeserializer takes it.
                        Some(raw.to_owned())
                    };
                    out.put(&k, value);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hashes_match_the_jdk() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("name"), 3_373_707);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 97 * 31 + 98);
    }

    #[test]
    fn capacity_grows_as_put_does() {
        assert_eq!(hashmap_capacity(0), 16);
        assert_eq!(hashmap_capacity(12), 16);
        assert_eq!(hashmap_capacity(13), 32);
        assert_eq!(hashmap_capacity(24), 32);
        assert_eq!(hashmap_capacity(25), 64);
    }

    #[test]
    fn coerces_scalars_and_keeps_order() {
        let c: OrderedConfig =
            serde_json::from_str(r#"{"b":"x","a":5432,"c":true,"d":null,"e":1.50,"b":"y"}"#)
                .unwrap_or_default();
        assert_eq!(
            c.0,
            vec![
                ("b".into(), Some("y".into())),
                ("a".into(), Some("5432".into())),
                ("c".into(), Some("true".into())),
                ("d".into(), None),
                ("e".into(), Some("1.50".into())),
            ]
        );
    }
}
