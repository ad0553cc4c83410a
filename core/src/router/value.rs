//! The record's value: the payload as is, expanded from JSON, or wrapped
//! in an envelope struct with its placements; tombstones for blank
//! payloads; the value converter last. Envelope schemas are cached as
//! Debezium caches them. Never does I/O or logs.

use std::sync::Arc;

use bytes::Bytes;

use super::config::{self, InvalidJsonPolicy, Placement};
use super::{BoundRelation, Headers, Part, RouteError, Router, Row};
use crate::connect::config::ConverterKind;
use crate::connect::convert::write_json_schema;
use crate::connect::expand::{ExpandError, ExpandStage};
use crate::connect::{Field, Schema, Value};

/// Name of the envelope's payload field.
pub(super) const ENVELOPE_PAYLOAD: &str = config::ENVELOPE_PAYLOAD_FIELD;

/// Envelope schemas remembered; Debezium's LRU cache holds 10 000.
pub(super) const SCHEMA_CACHE_LIMIT: usize = 10_000;

impl Router {
    /// Whether the value can take the direct path: a `StringConverter`
    /// value, no envelope, only header placements, and a payload whose
    /// blankness (for `route.tombstone.on.empty.payload`) shows in its text.
    #[inline]
    pub(super) fn direct_value_applies(&self, bound: &BoundRelation) -> bool {
        self.value_direct
            && !bound.envelope
            && (!self.cfg.route_tombstone_on_empty_payload || bound.payload.ty.pg.is_text())
            && bound
                .placements
                .iter()
                .all(|p| p.placement == Placement::Header)
    }

    /// The value on the direct path: header placements first, then a
    /// tombstone for a blank payload or the payload's text as it is.
    pub(super) fn direct_value(
        &self,
        r: &Row<'_>,
        headers: &mut Headers,
    ) -> Result<Option<Bytes>, RouteError> {
        let bound = r.bound;
        for p in &bound.placements {
            headers.push_column(self, r, &p.column, &p.alias)?;
        }
        let tombstone = self.cfg.route_tombstone_on_empty_payload
            && match r.raw(&bound.payload)? {
                None => match &bound.payload.ty.schema.default {
                    None => true,
                    Some(Value::String(t)) => java_blank(t.bytes()),
                    Some(_) => false,
                },
                Some(text) => java_blank(text),
            };
        if tombstone {
            return Ok(None);
        }
        let schema = &bound.payload.ty.schema;
        r.direct(
            &bound.payload,
            |v| self.value_converter.from_connect_data(Some(schema), v),
            "value",
        )
    }

    /// The value through the general path: payload (maybe expanded),
    /// placements, envelope, tombstone, value converter (or, before a
    /// chain, the schema and value Debezium's record carries).
    pub(super) fn general_value<const CONNECT: bool>(
        &mut self,
        r: &Row<'_>,
        headers: &mut Headers,
        partition: &mut Option<i32>,
    ) -> Result<Part, RouteError> {
        let bound = r.bound;
        let payload = self.payload(r)?;
        let envelope_schema = if bound.envelope {
            Some(self.envelope_schema(r, &payload.schema, payload.expanded)?)
        } else {
            None
        };
        let mut fields = Vec::new();
        if bound.envelope {
            fields.push(payload.value.clone());
        }
        self.place(r, &mut fields, headers, partition)?;

        let blank = match &payload.value {
            Value::Null => true,
            Value::String(t) => java_blank(t.bytes()),
            _ => false,
        };
        if blank && self.cfg.route_tombstone_on_empty_payload {
            // Debezium's tombstone has neither value nor schema.
            return Ok(if CONNECT {
                Part::Connect(Box::new((None, Value::Null)))
            } else {
                Part::Bytes(None)
            });
        }
        if CONNECT {
            return Ok(match envelope_schema {
                Some(schema) => {
                    if fields.len() != schema.fields.len() {
                        fields.resize(schema.fields.len(), Value::Null);
                    }
                    Part::Connect(Box::new((Some(schema), Value::Struct(fields))))
                }
                None => Part::Connect(Box::new((
                    (!payload.schemaless).then_some(payload.schema),
                    payload.value,
                ))),
            });
        }
        let converted = match &envelope_schema {
            Some(schema) => {
                // A schema cached from an earlier relation layout can have
                // fewer fields than this row provides (Debezium's quirk);
                // Struct.put would fail on the unknown alias.
                if fields.len() != schema.fields.len() {
                    fields.resize(schema.fields.len(), Value::Null);
                }
                self.value_converter
                    .from_connect_data(Some(schema), &Value::Struct(fields))
            }
            None => self.value_converter.from_connect_data(
                (!payload.schemaless).then_some(&*payload.schema),
                &payload.value,
            ),
        };
        Ok(Part::Bytes(r.convert("value", converted)?))
    }

    /// The payload column's value, expanded from its JSON text when
    /// `table.expand.json.payload` is on; text that cannot be expanded
    /// goes out as text where Debezium sends it so, and is refused where
    /// Debezium's task would fail.
    fn payload(&mut self, r: &Row<'_>) -> Result<Payload, RouteError> {
        let c = &r.bound.payload;
        let mut p = Payload {
            schema: Arc::clone(&c.ty.schema),
            value: r.get(c)?,
            expanded: false,
            schemaless: false,
        };
        let (Some(expand), Value::String(text)) = (&self.expand, &p.value) else {
            return Ok(p);
        };
        match expand.expand(&c.name, text.as_str()) {
            Ok((schema, value)) => {
                p.schema = schema;
                p.value = value;
                p.expanded = true;
            }
            Err(
                ref e @ ExpandError {
                    stage: ExpandStage::Value { ref schema },
                    ..
                },
            ) => {
                p.schemaless = self.unfitting_expansion(r, e, schema)?;
                self.expansion_failures += 1;
            }
            Err(_) => {
                self.check_json_text(r, text.as_str())?;
                self.expansion_failures += 1;
            }
        }
        Ok(p)
    }

    /// An expansion whose schema was inferred (`schema`) but whose value
    /// does not fit it: Debezium goes on with the text under the inferred
    /// schema. Where its converter takes that, the text goes out (`true`:
    /// without a schema); where its task fails, the event is refused.
    fn unfitting_expansion(
        &self,
        r: &Row<'_>,
        e: &ExpandError,
        schema: &Option<Arc<Schema>>,
    ) -> Result<bool, RouteError> {
        let inferred = schema
            .as_ref()
            .map_or("no".to_owned(), |s| s.kind.java_name().to_owned());
        let refuse = |why: &str| RouteError::JsonExpansion {
            column: r.bound.payload.name.to_string(),
            lsn: r.meta.lsn,
            event_id: r.event_id(),
            reason: format!(
                "{e} after the payload's schema was replaced by the inferred one \
                 ({inferred} schema); {why}"
            ),
        };
        if r.bound.envelope {
            return Err(refuse(
                "debezium's envelope struct refuses the text there and its task fails",
            ));
        }
        match (self.value_converter.kind, schema) {
            // toString() of the text: what walrelay sends anyway.
            (ConverterKind::String, _) => Ok(false),
            (ConverterKind::Json, None) => Ok(true),
            _ => Err(refuse(
                "debezium's value converter refuses the text under it and its task fails",
            )),
        }
    }

    /// Debezium sends what it cannot expand as text; text that is not JSON
    /// at all is a bad input unless `invalid_json_payload = "pass"`. Blank
    /// text is left to the tombstone rule.
    fn check_json_text(&self, r: &Row<'_>, text: &str) -> Result<(), RouteError> {
        if self.cfg.invalid_json_payload != InvalidJsonPolicy::Error || java_blank(text.as_bytes())
        {
            return Ok(());
        }
        match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Ok(_) => Ok(()),
            Err(e) => Err(RouteError::InvalidJsonPayload {
                column: r.bound.payload.name.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
                reason: e.to_string(),
            }),
        }
    }

    /// `table.fields.additional.placement`: envelope fields into `fields`,
    /// header placements into `headers`, and the partition (`getInt32`:
    /// no default; a later partition placement wins).
    fn place(
        &self,
        r: &Row<'_>,
        fields: &mut Vec<Value>,
        headers: &mut Headers,
        partition: &mut Option<i32>,
    ) -> Result<(), RouteError> {
        for p in &r.bound.placements {
            match p.placement {
                Placement::Envelope => fields.push(r.get(&p.column)?),
                Placement::Header => headers.push_column(self, r, &p.column, &p.alias)?,
                Placement::Partition => {
                    *partition = match r.value(&p.column)? {
                        Value::Int32(v) => Some(v),
                        _ => None,
                    }
                }
            }
        }
        Ok(())
    }

    /// Debezium's `getValueSchema`: cached by payload schema (or by
    /// version when a version column is configured), so the first route
    /// value seen names the schema.
    pub(super) fn envelope_schema(
        &mut self,
        r: &Row<'_>,
        payload_schema: &Arc<Schema>,
        expanded: bool,
    ) -> Result<Arc<Schema>, RouteError> {
        let bound = r.bound;
        let build = |route: &str, version: Option<i32>| {
            let mut fields = vec![Field {
                name: Arc::from(ENVELOPE_PAYLOAD),
                schema: Arc::clone(payload_schema),
            }];
            for p in bound
                .placements
                .iter()
                .filter(|p| p.placement == Placement::Envelope)
            {
                fields.push(Field {
                    name: Arc::clone(&p.alias),
                    schema: Arc::clone(&p.column.ty.schema),
                });
            }
            // Debezium's getSchemaName: a message's decoded `after` has no
            // name, and the route value alone names the envelope.
            let name = match bound.after_schema_name.rfind('.') {
                _ if bound.after_schema_name.is_empty() => route.to_owned(),
                Some(dot) => format!(
                    "{}{route}.{}",
                    &bound.after_schema_name[..=dot],
                    &bound.after_schema_name[dot + 1..]
                ),
                None => format!("{route}.{}", bound.after_schema_name),
            };
            let mut s = Schema::structure(Some(&name), fields);
            s.version = version;
            Arc::new(s)
        };
        let route_text = || -> Result<String, RouteError> {
            let raw = r
                .raw(&bound.route)?
                .map(|b| String::from_utf8_lossy(b).into_owned());
            Ok(raw.unwrap_or_else(|| "null".to_owned()))
        };
        if let Some(vc) = &bound.version {
            let version = match r.value(vc)? {
                Value::Int32(v) => Some(v),
                _ => None,
            };
            let key = (Arc::clone(&bound.scope), version);
            if let Some(s) = self.versioned_schemas.get(&key) {
                return Ok(Arc::clone(s));
            }
            let s = build(&route_text()?, version);
            if self.versioned_schemas.len() >= SCHEMA_CACHE_LIMIT {
                self.versioned_schemas.clear();
            }
            self.versioned_schemas.insert(key, Arc::clone(&s));
            return Ok(s);
        }
        let key = if expanded {
            let mut k = bound.scope.to_string();
            write_json_schema(&mut k, payload_schema);
            k
        } else {
            bound.payload_schema_key.clone()
        };
        if let Some(s) = self.value_schemas.get(&key) {
            return Ok(Arc::clone(s));
        }
        let s = build(&route_text()?, None);
        if self.value_schemas.len() >= SCHEMA_CACHE_LIMIT {
            self.value_schemas.clear();
        }
        self.value_schemas.insert(key, Arc::clone(&s));
        Ok(s)
    }
}

/// `String.trim().isEmpty()` on UTF-8 bytes: Java trims every char up to
/// U+0020, and those are exactly the bytes up to 0x20.
pub(super) fn java_blank(text: &[u8]) -> bool {
    text.iter().all(|&b| b <= b' ')
}

/// The payload as the value carries it.
struct Payload {
    /// Its Connect schema: the column's, or the one inferred by expansion.
    schema: Arc<Schema>,
    value: Value,
    /// Whether it was expanded from JSON (envelope schemas are then
    /// cached by the inferred schema).
    expanded: bool,
    /// Whether it goes out without a schema (JsonConverter writes
    /// `"schema":null`): Debezium's empty array under `ignore`.
    schemaless: bool,
}
