//! Binding: the configured columns resolved once per Relation message (or
//! message shape) to positions, PostgreSQL types and Connect schemas, so
//! the per-event path only indexes. A layout that does not fit is recorded
//! on the binding, not raised, so the error policy applies per event.

use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::pgoutput::{ColumnValue, TupleData};
use walrelay_proto::RelationInfo;

use super::config::*;
use super::{headers, RouteError, Router};
use crate::connect::convert::write_json_schema;
use crate::connect::pg::{self, names, ColumnType, PgType, TableMeta};
use crate::connect::{Schema, Type};

/// Finds a configured column by name (and the key naming it) while binding.
pub(super) type ColumnLookup<'a> =
    dyn Fn(&str, &'static str) -> Result<Option<BoundColumn>, RouteError> + 'a;

/// How an INT64 timestamp column converts to milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimestampUnit {
    Millis,
    Micros,
    Nanos,
}

/// A column the router reads, resolved.
#[derive(Debug, Clone)]
pub(super) struct BoundColumn {
    pub(super) index: usize,
    pub(super) name: Arc<str>,
    pub(super) ty: ColumnType,
}

#[derive(Debug, Clone)]
pub(super) struct BoundPlacement {
    pub(super) column: BoundColumn,
    pub(super) placement: Placement,
    pub(super) alias: Arc<str>,
}

/// The outbox relation with every configured column resolved to its
/// position, type and Connect schema.
#[derive(Debug, Clone)]
pub struct BoundRelation {
    pub(super) relation: Arc<RelationInfo>,
    pub(super) id: BoundColumn,
    pub(super) key: BoundColumn,
    pub(super) payload: BoundColumn,
    pub(super) route: BoundColumn,
    pub(super) timestamp: Option<(BoundColumn, TimestampUnit)>,
    pub(super) version: Option<BoundColumn>,
    pub(super) placements: Vec<BoundPlacement>,
    pub(super) tracing: Option<BoundColumn>,
    /// The headers column (`router.headers_field`), when configured.
    pub(super) headers: Option<headers::HeadersColumn>,
    /// Debezium's `after` schema name: `<prefix>.<schema>.<table>.Value`.
    pub(super) after_schema_name: String,
    /// Cache key of the payload column's schema (with the column
    /// mapping's scope in front when a table overrides `[router]`'s).
    pub(super) payload_schema_key: String,
    /// Whether the value is an envelope struct (an `envelope` placement).
    pub(super) envelope: bool,
    /// The column mapping's [`ColumnMapping::scope`]: envelope schemas are
    /// cached per scope.
    pub(super) scope: Arc<str>,
    /// Position of the route column, where the relation has it.
    pub(super) route_index: Option<usize>,
    /// Positions of the configured id, key and payload columns, where the
    /// relation has them (also for a relation with a layout problem).
    pub(super) id_index: Option<usize>,
    pub(super) key_index: Option<usize>,
    pub(super) payload_index: Option<usize>,
    /// Why the relation's layout does not fit the configuration; every
    /// event of it is then an error naming the event ([`Router::route`]).
    pub(super) problem: Option<RouteError>,
    /// Columns, placed or not, whose NaN or infinity Debezium's change
    /// event cannot hold: `numeric` under `decimal.handling.mode=precise`,
    /// NOT NULL, without a default. Its `after` struct then refuses the
    /// null the conversion left ("Invalid value: null used for required
    /// field") and the task fails, whatever the router places.
    pub(super) strict_numerics: Vec<BoundColumn>,
    /// `router.numeric_nan`.
    pub(super) numeric_nan: NullPolicy,
}

impl BoundRelation {
    /// Why this relation's layout does not fit the routing configuration,
    /// if it does not; [`Router::route`] reports it for each event.
    #[cfg(test)]
    pub(crate) fn problem(&self) -> Option<&RouteError> {
        self.problem.as_ref()
    }

    /// `schema.table` of the relation.
    pub(crate) fn table_name(&self) -> String {
        self.relation.qualified_name()
    }

    /// The event id column's text, if the row has a non-null one.
    pub(crate) fn event_id(&self, row: &TupleData) -> Option<String> {
        match self.id_index.and_then(|i| row.get(i)) {
            Some(ColumnValue::Text(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The row's original bytes for a dead-letter record: the key column's
    /// text and the payload column's text (bytea: its text form), `None`
    /// where the column is NULL, absent or not text.
    pub(crate) fn original(&self, row: &TupleData) -> (Option<Bytes>, Option<Bytes>) {
        let raw = |i: Option<usize>| match i.and_then(|i| row.get(i)) {
            Some(ColumnValue::Text(b)) => Some(b.clone()),
            _ => None,
        };
        (raw(self.key_index), raw(self.payload_index))
    }

    pub(super) fn column_name(&self, index: usize) -> String {
        self.relation
            .columns
            .get(index)
            .map_or_else(|| format!("#{}", index + 1), |c| c.name.clone())
    }
}

impl Router {
    /// Resolves the configured columns against the outbox relation and the
    /// catalog facts about it; call once per Relation message, not per row.
    ///
    /// A layout that does not fit the configuration (a needed column
    /// missing or dropped, a wrong or unmappable type) does not fail here:
    /// the binding records it ([`BoundRelation::problem`]) and every event
    /// of the relation becomes a [`RouteError::Layout`] naming the event,
    /// its LSN and the column, so the error policy applies per event.
    pub fn bind(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
    ) -> Result<BoundRelation, RouteError> {
        self.bind_with(rel, table, &self.columns)
    }

    /// [`Router::bind`] with a table's own columns (a [`Router::mapping`]).
    pub fn bind_with(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
        columns: &ColumnMapping,
    ) -> Result<BoundRelation, RouteError> {
        let adjusted = self.adjusted_columns(rel, table);
        let (rel, table) = match &adjusted {
            Some((r, t)) => (r, t),
            None => (rel, table),
        };
        match self.bind_strict(rel, table, columns) {
            Ok(bound) => Ok(bound),
            Err(problem) => Ok(self.broken(rel, problem, columns)),
        }
    }

    /// [`Router::check_layout_with`] with the router's own columns.
    #[cfg(test)]
    pub(crate) fn check_layout(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
    ) -> Result<(), RouteError> {
        self.check_layout_with(rel, table, &self.columns)
    }

    /// `bind` with a table's own columns, failing on a layout problem
    /// instead of recording it (for `walrelay check`).
    pub fn check_layout_with(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
        columns: &ColumnMapping,
    ) -> Result<(), RouteError> {
        match self.adjusted_columns(rel, table) {
            Some((rel, table)) => self.bind_strict(&rel, &table, columns).map(drop),
            None => self.bind_strict(rel, table, columns).map(drop),
        }
    }

    /// The relation and catalog facts under the column names Debezium's
    /// `field.name.adjustment.mode` gives the `after` struct's fields
    /// (`event-id` becomes `event_id`); `None` when names are kept.
    pub(super) fn adjusted_columns(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
    ) -> Option<(Arc<RelationInfo>, TableMeta)> {
        let mode = self.column_names;
        if mode == crate::connect::expand::FieldNameAdjustment::None {
            return None;
        }
        let mut r = RelationInfo::clone(rel);
        for c in &mut r.columns {
            c.name = mode.adjust(&c.name);
        }
        let mut t = table.clone();
        for c in &mut t.columns {
            c.name = mode.adjust(&c.name);
        }
        Some((Arc::new(r), t))
    }

    /// A binding whose every event fails with `problem`; it keeps the
    /// positions of the id, key and payload columns that exist, for error
    /// context and dead-letter records.
    pub(super) fn broken(
        &self,
        rel: &Arc<RelationInfo>,
        problem: RouteError,
        columns: &ColumnMapping,
    ) -> BoundRelation {
        let placeholder = BoundColumn {
            index: usize::MAX,
            name: Arc::from(""),
            ty: ColumnType {
                pg: PgType::Text,
                schema: Arc::new(Schema::new(Type::String)),
            },
        };
        BoundRelation {
            relation: Arc::clone(rel),
            id: placeholder.clone(),
            key: placeholder.clone(),
            payload: placeholder.clone(),
            route: placeholder,
            timestamp: None,
            version: None,
            placements: Vec::new(),
            tracing: None,
            headers: None,
            after_schema_name: String::new(),
            payload_schema_key: String::new(),
            envelope: columns.envelope,
            scope: Arc::from(columns.scope.as_str()),
            route_index: rel.column_index(&columns.route_by_field),
            id_index: rel.column_index(&columns.id_field),
            key_index: rel.column_index(&columns.key_field),
            payload_index: rel.column_index(&columns.payload_field),
            problem: Some(problem),
            strict_numerics: Vec::new(),
            numeric_nan: self.cfg.numeric_nan,
        }
    }

    pub(super) fn bind_strict(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
        columns: &ColumnMapping,
    ) -> Result<BoundRelation, RouteError> {
        let column = |name: &str, key: &'static str| -> Result<Option<BoundColumn>, RouteError> {
            let Some(index) = rel.column_index(name) else {
                return Ok(None);
            };
            let info = &rel.columns[index];
            let meta = table.column(name);
            let ty = pg::column_type_with(info.type_oid, info.type_modifier, meta, self.type_modes)
                .ok_or_else(|| {
                    RouteError::UnmappableType {
                        table: rel.qualified_name(),
                        column: name.to_owned(),
                        key,
                        // The catalog facts are read at session start; after an
                        // ALTER while streaming only the OID is current.
                        type_name: match meta.and_then(|m| m.type_name.as_deref()) {
                            Some(name) => format!(
                                "oid {} (the catalog said {name} at session start)",
                                info.type_oid
                            ),
                            None => format!("oid {}", info.type_oid),
                        },
                    }
                })?;
            Ok(Some(BoundColumn {
                index,
                name: Arc::from(name),
                ty,
            }))
        };
        let after_schema_name = self.schema_names.adjust_schema_name(&format!(
            "{}.{}.{}.Value",
            self.topic_prefix, rel.namespace, rel.name
        ));
        let mut bound = self.bind_columns(rel, &column, after_schema_name, columns)?;
        bound.strict_numerics = self.strict_numerics(rel, table);
        Ok(bound)
    }

    /// [`BoundRelation::strict_numerics`] of `rel`.
    fn strict_numerics(&self, rel: &RelationInfo, table: &TableMeta) -> Vec<BoundColumn> {
        rel.columns
            .iter()
            .enumerate()
            .filter_map(|(index, info)| {
                let ty = pg::column_type_with(
                    info.type_oid,
                    info.type_modifier,
                    table.column(&info.name),
                    self.type_modes,
                )?;
                let strict = matches!(ty.pg, PgType::Numeric { .. } | PgType::VariableNumeric)
                    && !ty.schema.optional
                    && ty.schema.default.is_none();
                strict.then(|| BoundColumn {
                    index,
                    name: Arc::from(info.name.as_str()),
                    ty,
                })
            })
            .collect()
    }

    /// The checks and resolution of [`Router::bind_strict`], for a relation
    /// or a message's members: `column` finds a configured column by name.
    pub(super) fn bind_columns(
        &self,
        rel: &Arc<RelationInfo>,
        column: &ColumnLookup<'_>,
        after_schema_name: String,
        columns: &ColumnMapping,
    ) -> Result<BoundRelation, RouteError> {
        let id = required(rel, column, &columns.id_field, KEY_ID_FIELD)?;
        let key = required(rel, column, &columns.key_field, KEY_KEY_FIELD)?;
        let payload = required(rel, column, &columns.payload_field, KEY_PAYLOAD_FIELD)?;
        let route = required(rel, column, &columns.route_by_field, KEY_ROUTE_BY_FIELD)?;
        if route.ty.schema.kind != Type::String {
            return Err(wrong_type(
                rel,
                &route,
                KEY_ROUTE_BY_FIELD,
                "a string column (getString)",
            ));
        }
        let timestamp = bind_timestamp(rel, column, columns)?;
        let version = bind_version(rel, column, columns)?;
        let placements = self.bind_placements(rel, column, columns)?;
        let tracing = bind_tracing(rel, column, columns)?;
        let headers = self.bind_headers(rel, column, &placements, tracing.is_some())?;
        let mut payload_schema_key = columns.scope.clone();
        write_json_schema(&mut payload_schema_key, &payload.ty.schema);
        Ok(BoundRelation {
            envelope: columns.envelope,
            scope: Arc::from(columns.scope.as_str()),
            route_index: Some(route.index),
            id_index: Some(id.index),
            key_index: Some(key.index),
            payload_index: Some(payload.index),
            problem: None,
            strict_numerics: Vec::new(),
            numeric_nan: self.cfg.numeric_nan,
            relation: Arc::clone(rel),
            after_schema_name,
            id,
            key,
            payload,
            route,
            timestamp,
            version,
            placements,
            tracing,
            headers,
            payload_schema_key,
        })
    }

    /// `table.fields.additional.placement`, in order; a missing column is
    /// skipped under `table.field.additional.missing=ignore`, and a
    /// partition must come from an INT32.
    fn bind_placements(
        &self,
        rel: &Arc<RelationInfo>,
        column: &ColumnLookup<'_>,
        columns: &ColumnMapping,
    ) -> Result<Vec<BoundPlacement>, RouteError> {
        let mut placements = Vec::with_capacity(columns.placements.len());
        for p in &columns.placements {
            let Some(c) = column(&p.column, KEY_ADDITIONAL_PLACEMENT)? else {
                if self.cfg.additional_missing == AdditionalMissing::Ignore {
                    continue;
                }
                return Err(RouteError::MissingColumn {
                    table: rel.qualified_name(),
                    column: p.column.clone(),
                    key: KEY_ADDITIONAL_PLACEMENT,
                });
            };
            if p.placement == Placement::Partition && c.ty.schema.kind != Type::Int32 {
                return Err(wrong_type(
                    rel,
                    &c,
                    KEY_ADDITIONAL_PLACEMENT,
                    "an INT32 (int4) column for a partition placement",
                ));
            }
            placements.push(BoundPlacement {
                column: c,
                placement: p.placement,
                alias: Arc::from(p.alias.as_str()),
            });
        }
        Ok(placements)
    }
}

/// A configured column the relation must have (`MissingColumn` otherwise).
fn required(
    rel: &RelationInfo,
    column: &ColumnLookup<'_>,
    name: &str,
    key: &'static str,
) -> Result<BoundColumn, RouteError> {
    column(name, key)?.ok_or_else(|| RouteError::MissingColumn {
        table: rel.qualified_name(),
        column: name.to_owned(),
        key,
    })
}

/// The error for a column whose Connect schema is not what the
/// EventRouter reads it as.
fn wrong_type(
    rel: &RelationInfo,
    c: &BoundColumn,
    key: &'static str,
    expected: &'static str,
) -> RouteError {
    RouteError::WrongColumnType {
        table: rel.qualified_name(),
        column: c.name.to_string(),
        key,
        expected,
        actual: c.ty.schema.java_string(),
    }
}

/// The timestamp column and how its INT64 converts to milliseconds; only
/// the `timestamp` types qualify (timestamptz is a string in Connect).
fn bind_timestamp(
    rel: &RelationInfo,
    column: &ColumnLookup<'_>,
    columns: &ColumnMapping,
) -> Result<Option<(BoundColumn, TimestampUnit)>, RouteError> {
    let Some(name) = &columns.timestamp_field else {
        return Ok(None);
    };
    let c = required(rel, column, name, KEY_TIMESTAMP_FIELD)?;
    let unit = match (c.ty.schema.kind, c.ty.schema.name.as_deref()) {
        (Type::Int64, Some(names::TIMESTAMP)) => TimestampUnit::Millis,
        (Type::Int64, Some(names::MICRO_TIMESTAMP)) => TimestampUnit::Micros,
        (Type::Int64, Some(names::NANO_TIMESTAMP)) => TimestampUnit::Nanos,
        _ => {
            return Err(wrong_type(
                rel,
                &c,
                KEY_TIMESTAMP_FIELD,
                "an INT64 Timestamp, MicroTimestamp or NanoTimestamp (a timestamp column, not timestamptz)",
            ))
        }
    };
    Ok(Some((c, unit)))
}

/// The schema version column, an INT32; Debezium reads it only to name
/// envelope schemas, so without an envelope it is not looked up at all.
fn bind_version(
    rel: &RelationInfo,
    column: &ColumnLookup<'_>,
    columns: &ColumnMapping,
) -> Result<Option<BoundColumn>, RouteError> {
    let (Some(name), true) = (&columns.schema_version_field, columns.envelope) else {
        return Ok(None);
    };
    let c = required(rel, column, name, KEY_SCHEMA_VERSION_FIELD)?;
    if c.ty.schema.kind != Type::Int32 {
        return Err(wrong_type(
            rel,
            &c,
            KEY_SCHEMA_VERSION_FIELD,
            "an INT32 (int4) column",
        ));
    }
    Ok(Some(c))
}

/// The span context column, optional and a string when present.
fn bind_tracing(
    rel: &RelationInfo,
    column: &ColumnLookup<'_>,
    columns: &ColumnMapping,
) -> Result<Option<BoundColumn>, RouteError> {
    let tracing = column(
        &columns.tracing_span_context_field,
        KEY_TRACING_SPAN_CONTEXT_FIELD,
    )?;
    if let Some(c) = &tracing {
        if c.ty.schema.kind != Type::String {
            return Err(wrong_type(
                rel,
                c,
                KEY_TRACING_SPAN_CONTEXT_FIELD,
                "a string column",
            ));
        }
    }
    Ok(tracing)
}
