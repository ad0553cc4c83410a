//! The status topic (`status.storage.topic`) in Connect's record format:
//! `status-connector-<name>` and `status-task-<name>-<n>` →
//! `{"state": ..., "trace": ..., "worker_id": ..., "generation": N}`
//! (JSON without schemas, fields in Connect's order), and
//! `status-topic-<topic>:connector-<name>` → the topics a connector has
//! produced to. A tombstone removes.
//!
//! Owns the group's status as read from the topic and the encoding of
//! what walrelay writes. It never connects.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::api::{State, StateInfo};
use super::log::Apply;

const CONNECTOR_PREFIX: &str = "status-connector-";
const TASK_PREFIX: &str = "status-task-";
const TOPIC_PREFIX: &str = "status-topic-";

/// A status as written, with the generation it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    /// State, worker and trace.
    pub(crate) info: StateInfo,
    /// The group generation of the write.
    pub(crate) generation: i32,
}

/// The group's statuses.
#[derive(Debug, Default)]
pub(crate) struct GroupStatus {
    /// Connector statuses by name.
    pub(crate) connectors: BTreeMap<String, Status>,
    /// Task statuses by connector and number.
    pub(crate) tasks: BTreeMap<(String, i32), Status>,
    /// Active topics: connector → topic names.
    pub(crate) topics: BTreeMap<String, BTreeMap<String, ()>>,
}

impl GroupStatus {
    /// Every worker that has reported a status, with the connectors it
    /// reported running.
    pub(crate) fn workers(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, s) in &self.connectors {
            let list = out.entry(s.info.worker_id.clone()).or_default();
            if matches!(s.info.state, State::Running | State::Paused) {
                list.push(name.clone());
            }
        }
        out
    }
}

/// Whether `new` replaces `old`: Connect keeps a later write unless it is
/// an `UNASSIGNED` of an older generation than what it has.
fn replaces(old: Option<&Status>, new: &Status) -> bool {
    match old {
        Some(old) => !(new.info.state == State::Unassigned && new.generation < old.generation),
        None => true,
    }
}

impl Apply for GroupStatus {
    fn apply(&mut self, key: &str, value: Option<&[u8]>, _partition: i32, _offset: i64) {
        if let Some(rest) = key.strip_prefix(TOPIC_PREFIX) {
            // `status-topic-<topic>:connector-<name>`.
            let Some((topic, connector)) = rest.split_once(":connector-") else {
                return;
            };
            let topics = self.topics.entry(connector.to_owned()).or_default();
            match value {
                Some(_) => topics.insert(topic.to_owned(), ()),
                None => topics.remove(topic),
            };
            return;
        }
        let status = value.and_then(parse);
        if let Some(name) = key.strip_prefix(CONNECTOR_PREFIX) {
            match status {
                None => {
                    self.connectors.remove(name);
                }
                Some(s) => {
                    if replaces(self.connectors.get(name), &s) {
                        self.connectors.insert(name.to_owned(), s);
                    }
                }
            }
        } else if let Some(rest) = key.strip_prefix(TASK_PREFIX) {
            let Some((name, n)) = rest.rsplit_once('-') else {
                return;
            };
            let Ok(n) = n.parse::<i32>() else { return };
            let id = (name.to_owned(), n);
            match status {
                None => {
                    self.tasks.remove(&id);
                }
                Some(s) => {
                    if replaces(self.tasks.get(&id), &s) {
                        self.tasks.insert(id, s);
                    }
                }
            }
        }
    }
}

fn parse(bytes: &[u8]) -> Option<Status> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    Some(Status {
        info: StateInfo {
            state: State::parse(v.get("state")?.as_str()?)?,
            worker_id: v.get("worker_id")?.as_str()?.to_owned(),
            trace: v.get("trace").and_then(Value::as_str).map(str::to_owned),
        },
        generation: v.get("generation").and_then(Value::as_i64).unwrap_or(0) as i32,
    })
}

fn encode(status: &Status) -> Vec<u8> {
    // serde_json keeps insertion order only with preserve_order; write the
    // object by hand in Connect's field order.
    let trace = match &status.info.trace {
        Some(t) => Value::String(t.clone()).to_string(),
        None => "null".into(),
    };
    format!(
        "{{\"state\":{},\"trace\":{},\"worker_id\":{},\"generation\":{}}}",
        json!(status.info.state.as_str()),
        trace,
        json!(status.info.worker_id),
        status.generation
    )
    .into_bytes()
}

/// A connector's status record (`None`: remove it).
pub(crate) fn connector_record(name: &str, status: Option<&Status>) -> (String, Option<Vec<u8>>) {
    (format!("{CONNECTOR_PREFIX}{name}"), status.map(encode))
}

/// A task's status record (`None`: remove it).
pub(crate) fn task_record(
    name: &str,
    task: i32,
    status: Option<&Status>,
) -> (String, Option<Vec<u8>>) {
    (format!("{TASK_PREFIX}{name}-{task}"), status.map(encode))
}

/// An active topic record of a connector's task.
pub(crate) fn topic_record(
    connector: &str,
    topic: &str,
    task: i32,
    now_ms: i64,
) -> (String, Option<Vec<u8>>) {
    let value = format!(
        "{{\"topic\":{{\"name\":{},\"connector\":{},\"task\":{task},\"discoverTimestamp\":{now_ms}}}}}",
        json!(topic),
        json!(connector)
    );
    (
        format!("{TOPIC_PREFIX}{topic}:connector-{connector}"),
        Some(value.into_bytes()),
    )
}

/// The tombstone of an active topic record.
pub(crate) fn topic_tombstone(connector: &str, topic: &str) -> (String, Option<Vec<u8>>) {
    (format!("{TOPIC_PREFIX}{topic}:connector-{connector}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: State, generation: i32) -> Status {
        Status {
            info: StateInfo {
                state,
                worker_id: "127.0.0.1:8083".into(),
                trace: None,
            },
            generation,
        }
    }

    #[test]
    fn records_are_connects_and_round_trip() {
        let s = status(State::Running, 3);
        let (key, value) = connector_record("n-1", Some(&s));
        assert_eq!(key, "status-connector-n-1");
        assert_eq!(
            String::from_utf8(value.clone().unwrap()).unwrap(),
            r#"{"state":"RUNNING","trace":null,"worker_id":"127.0.0.1:8083","generation":3}"#
        );
        let mut g = GroupStatus::default();
        g.apply(&key, value.as_deref(), 0, 0);
        let (tkey, tvalue) = task_record("n-1", 0, Some(&s));
        g.apply(&tkey, tvalue.as_deref(), 0, 1);
        assert_eq!(g.connectors["n-1"], s);
        assert_eq!(g.tasks[&("n-1".to_owned(), 0)], s);
        // An UNASSIGNED of an older generation does not replace.
        let (k, v) = connector_record("n-1", Some(&status(State::Unassigned, 2)));
        g.apply(&k, v.as_deref(), 0, 2);
        assert_eq!(g.connectors["n-1"].info.state, State::Running);
        let (k, v) = topic_record("n-1", "outbox.event.order", 0, 5);
        g.apply(&k, v.as_deref(), 0, 3);
        assert!(g.topics["n-1"].contains_key("outbox.event.order"));
        let (k, v) = connector_record("n-1", None);
        g.apply(&k, v.as_deref(), 0, 4);
        assert!(!g.connectors.contains_key("n-1"));
    }
}
