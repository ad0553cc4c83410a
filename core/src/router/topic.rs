//! The record's topic: the route column's value through `RegexRouter`,
//! checked as the broker checks a name, and cached per route value so a
//! known route costs one map lookup. Never does I/O.

use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::pgoutput::{ColumnValue, TupleData};

use super::{BoundRelation, RouteError, Router, Row};

/// Distinct route values remembered before the topic cache is cleared; real
/// outboxes have a handful of aggregate types, so this only bounds abuse.
pub(super) const TOPIC_CACHE_LIMIT: usize = 10_000;

/// Checks a topic name as the Kafka broker does (`Topic.validate`): 1 to
/// 249 characters of ASCII letters, digits, `.`, `_` and `-`, and not `.`
/// or `..`. Checked before producing, so a bad route value is an error
/// naming its event, not a delivery failure.
pub fn check_topic_name(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() {
        return Err("it is empty");
    }
    if topic == "." || topic == ".." {
        return Err("\".\" and \"..\" are not allowed");
    }
    if topic.len() > 249 {
        return Err("it is longer than 249 characters");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("only ascii letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

impl Router {
    pub(super) fn topic(&mut self, r: &Row<'_>, route: &Bytes) -> Result<Arc<str>, RouteError> {
        if let Some(topic) = self.topics.get(route.as_ref()) {
            return Ok(Arc::clone(topic));
        }
        let route_str =
            std::str::from_utf8(route).map_err(|source| RouteError::NonUtf8RouteValue {
                column: r.bound.route.name.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
                source,
            })?;
        let topic: Arc<str> = Arc::from(self.rewrite.apply(route_str));
        // Only legal names are cached, so a cached topic needs no check.
        if let Err(reason) = check_topic_name(&topic) {
            return Err(RouteError::InvalidTopic {
                column: r.bound.route.name.to_string(),
                topic: topic.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
                reason,
            });
        }
        if self.topics.len() >= TOPIC_CACHE_LIMIT {
            self.topics.clear();
        }
        self.topics
            .insert(Box::from(route.as_ref()), Arc::clone(&topic));
        Ok(topic)
    }

    /// The topic an event was meant for, where its route column gives a
    /// legal one; for the context of an event [`Router::route`] refused.
    pub(crate) fn intended_topic(
        &mut self,
        bound: &BoundRelation,
        row: &TupleData,
    ) -> Option<Arc<str>> {
        let index = bound.route_index?;
        let Some(ColumnValue::Text(route)) = row.get(index) else {
            return None;
        };
        if let Some(topic) = self.topics.get(route.as_ref()) {
            return Some(Arc::clone(topic));
        }
        let topic = self.rewrite.apply(std::str::from_utf8(route).ok()?);
        check_topic_name(&topic).ok()?;
        Some(Arc::from(topic))
    }
}
