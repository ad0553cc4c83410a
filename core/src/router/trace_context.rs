//! W3C trace context headers (`traceparent`, `tracestate`) for a record,
//! as Debezium's `ActivateTracingSpan` writes them from the span context
//! column. Draws random ids; never does I/O or logs.

use std::sync::Arc;

use super::{Headers, RouteError, Router, Row, HEADER_TRACEPARENT, HEADER_TRACESTATE};
use crate::properties::parse_properties_ordered;

impl Router {
    /// OpenTelemetry W3C propagation as Debezium's `ActivateTracingSpan`
    /// documents it: a row with a span context (Java properties text with
    /// `traceparent`) gets a `traceparent` for a new child span and its
    /// `tracestate`; without one, nothing unless
    /// `tracing.with.context.field.only=false`, which starts a new trace.
    pub(super) fn tracing_headers(
        &self,
        r: &Row<'_>,
        headers: &mut Headers,
    ) -> Result<(), RouteError> {
        let context = match &r.bound.tracing {
            Some(c) => r.raw(c)?,
            None => None,
        };
        if context.is_none() && self.tracing_context_only {
            return Ok(());
        }
        // Debezium reads the column with `Properties.load`; a text it cannot
        // read (a malformed `\u` escape) carries no usable parent here.
        let props = context
            .and_then(|b| parse_properties_ordered(&String::from_utf8_lossy(b)).ok())
            .unwrap_or_default();
        let parent = props
            .iter()
            .find(|(k, _)| k == HEADER_TRACEPARENT)
            .and_then(|(_, v)| parse_traceparent(v));
        let span: [u8; 8] = loop {
            let s: [u8; 8] = rand::random();
            if s != [0; 8] {
                break s;
            }
        };
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        let (trace, flags, state) = match parent {
            Some((trace, flags)) => {
                let state = props
                    .iter()
                    .find(|(k, _)| k == HEADER_TRACESTATE)
                    .map(|(_, v)| v.clone());
                (trace, flags, state)
            }
            None => {
                let t: [u8; 16] = loop {
                    let t: [u8; 16] = rand::random();
                    if t != [0; 16] {
                        break t;
                    }
                };
                (t, 1, None)
            }
        };
        crate::connect::java::hex(&trace, &mut out);
        out.push('-');
        crate::connect::java::hex(&span, &mut out);
        out.push('-');
        crate::connect::java::hex(&[flags], &mut out);
        let mut add = |name: &Arc<str>, value: String| headers.push_string(self, r, name, value);
        add(&self.traceparent_header, out)?;
        if let Some(state) = state.filter(|s| !s.is_empty()) {
            add(&self.tracestate_header, state)?;
        }
        Ok(())
    }
}

/// `00-<32 hex>-<16 hex>-<2 hex>` → (trace id, flags); invalid ids are
/// refused as the W3C propagator refuses them.
pub(super) fn parse_traceparent(v: &str) -> Option<([u8; 16], u8)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    if parts.len() < 4
        || parts[0].len() != 2
        || parts[1].len() != 32
        || parts[2].len() != 16
        || parts[3].len() != 2
    {
        return None;
    }
    if parts[0] == "ff" {
        return None;
    }
    let hex = |s: &str| -> Option<Vec<u8>> {
        if !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
            .collect()
    };
    let trace: [u8; 16] = hex(parts[1])?.try_into().ok()?;
    let span = hex(parts[2])?;
    let flags = hex(parts[3])?;
    if trace == [0; 16] || span.iter().all(|b| *b == 0) {
        return None;
    }
    Some((trace, flags[0]))
}
