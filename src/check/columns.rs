//! The `outbox table` rows of the WAL source: each table exists, and the
//! router binds to the columns the stream will hand it (through
//! [`Router::check_layout_with`], so the layout is judged exactly as the
//! stream will judge it), each fix naming the config key to change; and
//! the route values that name the topics. It must never judge privileges
//! or the publication (their rows are `publication`'s) and never read more
//! than [`ROUTE_VALUE_LIMIT`] route values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;
use walrelay_proto::{RelationColumnInfo, RelationInfo};

use super::report::{CheckReport, OUTBOX_TABLE};
use super::step::{read, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog::preflight::{self, OutboxTable};
use crate::router::{
    native_column_option, ColumnMapping, ColumnMeta, RouteError, Router, TableMeta,
    KEY_HEADERS_FIELD, KEY_ROUTE_BY_FIELD,
};
use crate::txn::config::{OutboxTableSpec, KEY_TABLE};

/// Most distinct route values read from the outbox to name topics.
pub(super) const ROUTE_VALUE_LIMIT: i64 = 100;

/// Distinct route values in the outbox: `None` when they were not read,
/// `Err` (why) when they could not be.
pub(super) type RouteValues = Option<Result<Vec<String>, String>>;

/// One `outbox table` row per table: missing, unreadable, or its columns
/// bound to the router. Returns each table's facts (`None`: not found) and
/// the route values of all the tables together.
pub(super) async fn check_tables(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    tables: &[OutboxTableSpec],
) -> (Vec<Option<OutboxTable>>, RouteValues) {
    let mut all_facts = Vec::with_capacity(tables.len());
    let mut route_values = None;
    for spec in tables {
        let facts = table_facts(report, config, client, timeout, spec).await;
        if let Some(f) = &facts {
            if let Some(route) = check_columns(report, config, client, timeout, f, spec).await {
                let values = read_route_values(client, timeout, spec, &route)
                    .await
                    .map_err(|e| DisplayChain(&e).to_string());
                route_values = Some(merge(route_values, values));
            }
        }
        all_facts.push(facts);
    }
    (all_facts, route_values)
}

/// The route values of one more table added to those read so far (the
/// first error wins).
fn merge(seen: RouteValues, values: Result<Vec<String>, String>) -> Result<Vec<String>, String> {
    match (seen, values) {
        (None, v) => v,
        (Some(Err(e)), _) | (Some(Ok(_)), Err(e)) => Err(e),
        (Some(Ok(mut all)), Ok(more)) => {
            for v in more {
                if !all.contains(&v) {
                    all.push(v);
                }
            }
            Ok(all)
        }
    }
}

/// The table's facts, or a failed `outbox table` row.
async fn table_facts(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    spec: &OutboxTableSpec,
) -> Option<OutboxTable> {
    let qualified = spec.qualified();
    match outbox_facts(client, timeout, &spec.schema, &spec.table).await {
        Ok(Some(f)) => Some(f),
        Ok(None) => {
            report.fail(
                OUTBOX_TABLE,
                format!(
                    "{qualified} does not exist in database {} (or is not a table)",
                    config.postgres.dbname
                ),
                format!(
                    "create the outbox table, or set {} to the table your services write to (schema.table)",
                    table_key(spec)
                ),
            );
            None
        }
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                format!("{qualified}: {}", DisplayChain(&e)),
                "make sure the role can read the catalog (pg_class, pg_attribute)",
            );
            None
        }
    }
}

/// The catalog's facts of table `schema.table` (`None`: no such table).
pub(super) async fn outbox_facts(
    client: &Client,
    timeout: Duration,
    schema: &str,
    table: &str,
) -> Result<Option<OutboxTable>, CheckError> {
    read(
        "the outbox table",
        timeout,
        preflight::outbox_table(client, schema, table),
    )
    .await
}

/// The config key of a Debezium router key for the table `spec`, for
/// messages: the table's own (`outbox.tables[<i>].key_field`) where it
/// sets one, else `[router]`'s; `router.headers_field` is native only.
fn native_key(debezium_key: &str, spec: &OutboxTableSpec) -> String {
    if debezium_key == KEY_HEADERS_FIELD {
        return KEY_HEADERS_FIELD.to_owned();
    }
    match native_column_option(debezium_key) {
        Some(native) if spec.columns.sets(native) => format!("{}.{native}", spec.key),
        Some(native) => format!("router.{native}"),
        None => "router".to_owned(),
    }
}

/// The key that names an outbox table, for fixes.
fn table_key(spec: &OutboxTableSpec) -> String {
    if spec.key == KEY_TABLE {
        spec.key.clone()
    } else {
        format!("{}.name", spec.key)
    }
}

/// The config key of a router key for a fix, with its Debezium key when
/// it has one.
fn key_for_fix(key: &str, spec: &OutboxTableSpec) -> String {
    match native_key(key, spec) {
        native if native == key => native,
        native => format!("{native} (Debezium {key})"),
    }
}

/// Binds the router to the table's published columns, as the stream will on
/// the first Relation message. Returns the route column when it is usable.
async fn check_columns(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    facts: &OutboxTable,
    spec: &OutboxTableSpec,
) -> Option<String> {
    let (schema, table) = (spec.schema.as_str(), spec.table.as_str());
    let rows = read(
        "the outbox table's columns",
        timeout,
        preflight::outbox_columns(client, facts.oid),
    )
    .await;
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                format!("{}: {}", spec.qualified(), DisplayChain(&e)),
                "make sure the role can read pg_attribute",
            );
            return None;
        }
    };
    // A publication with a column list sends only those columns.
    let published: Option<BTreeSet<String>> =
        preflight::published_columns(client, &config.replication.publication, schema, table)
            .await
            .ok()
            .flatten()
            .map(|names| names.into_iter().collect());
    bind_columns(report, config, facts.oid, rows, published, spec)
}

/// Binds the router to `rows`, the columns the source will hand it (of
/// those, only the ones in `published` when a publication lists columns),
/// with the table's own columns. Returns the route column when it is
/// usable.
pub(super) fn bind_columns(
    report: &mut CheckReport,
    config: &Config,
    table_oid: u32,
    rows: Vec<preflight::OutboxColumn>,
    published: Option<BTreeSet<String>>,
    spec: &OutboxTableSpec,
) -> Option<String> {
    let layout = Layout::new(table_oid, rows, published.as_ref(), spec);
    let qualified = layout.relation.qualified_name();
    let routing = Router::new(
        config.router.clone(),
        config.converters,
        config.debezium.clone(),
    )
    .and_then(|router| {
        let columns = router.mapping(&spec.columns)?;
        Ok((router, columns))
    });
    let (router, columns) = match routing {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                format!(
                    "{qualified}: the routing configuration is invalid: {}",
                    DisplayChain(&e)
                ),
                "fix the [router] / [converters] settings it names",
            );
            return None;
        }
    };
    let route = columns.route_by_field().to_owned();
    let types = &layout.types;
    match router.check_layout_with(&layout.relation, &TableMeta::new(layout.metas), &columns) {
        Ok(_) => {
            let detail = bound_detail(config, spec, &qualified, &columns, types);
            report.pass(OUTBOX_TABLE, detail);
            Some(route)
        }
        Err(e) => {
            let published = published.is_some();
            let fix = layout_fix(&e, config, spec, &qualified, published, types.is_empty());
            report.fail(OUTBOX_TABLE, DisplayChain(&e).to_string(), fix);
            // The route column alone may still name topics.
            let usable = types.contains_key(&route)
                && !matches!(&e, RouteError::WrongColumnType { key, .. } if *key == KEY_ROUTE_BY_FIELD);
            usable.then_some(route)
        }
    }
}

/// A table as the source will describe it to the router: the Relation
/// message, the catalog's facts of each column and each column's type name.
struct Layout {
    relation: Arc<RelationInfo>,
    metas: Vec<ColumnMeta>,
    types: BTreeMap<String, String>,
}

impl Layout {
    /// The layout of `rows`, of those only the ones in `published` when a
    /// publication lists columns.
    fn new(
        table_oid: u32,
        rows: Vec<preflight::OutboxColumn>,
        published: Option<&BTreeSet<String>>,
        spec: &OutboxTableSpec,
    ) -> Self {
        let mut columns = Vec::new();
        let mut metas = Vec::new();
        let mut types = BTreeMap::new();
        for r in rows {
            let name = r.name;
            if published.is_some_and(|p| !p.contains(&name)) {
                continue;
            }
            let type_name = r.type_name;
            columns.push(RelationColumnInfo {
                name: name.clone(),
                type_oid: r.type_oid,
                type_modifier: r.type_modifier,
                is_key: false,
            });
            metas.push(ColumnMeta {
                name: name.clone(),
                not_null: r.not_null,
                type_name: Some(type_name.clone()),
                default_expr: r.default_expr,
            });
            types.insert(name, type_name);
        }
        let relation = Arc::new(RelationInfo {
            id: table_oid,
            namespace: spec.schema.clone(),
            name: spec.table.clone(),
            replica_identity: b'd',
            columns,
        });
        Layout {
            relation,
            metas,
            types,
        }
    }
}

/// The passing row's detail: each column the router reads, with its type.
fn bound_detail(
    config: &Config,
    spec: &OutboxTableSpec,
    qualified: &str,
    columns: &ColumnMapping,
    types: &BTreeMap<String, String>,
) -> String {
    let route = columns.route_by_field();
    let shown = |c: &str| format!("{c} ({})", types.get(c).map_or("?", String::as_str));
    let headers = config
        .router
        .headers_field
        .as_deref()
        .map(|c| format!(", headers {}", shown(c)))
        .unwrap_or_default();
    let own = if spec.columns.is_empty() {
        ""
    } else {
        " (its own columns)"
    };
    format!(
        "{qualified}{own}: id {}, key {}, payload {}, route by {}{headers}",
        shown(columns.id_field()),
        shown(columns.key_field()),
        shown(columns.payload_field()),
        shown(route)
    )
}

/// How to fix a layout the router refuses. `published`: a publication
/// lists columns; `no_columns`: not one column reached the router.
fn layout_fix(
    e: &RouteError,
    config: &Config,
    spec: &OutboxTableSpec,
    qualified: &str,
    published: bool,
    no_columns: bool,
) -> String {
    match e {
        RouteError::MissingColumn { column, key, .. } => {
            let filtered = if published && no_columns {
                String::new()
            } else if published {
                format!(
                    " (publication {} lists only some columns: add it there too)",
                    config.replication.publication
                )
            } else {
                String::new()
            };
            format!(
                "add column \"{column}\" to {qualified}, or set {} to the column that holds it{filtered}",
                key_for_fix(key, spec)
            )
        }
        RouteError::WrongColumnType { column, key, expected, .. } => format!(
            "make \"{column}\" {expected}, or set {} to a column that is",
            key_for_fix(key, spec)
        ),
        RouteError::UnmappableType { column, key, .. } => format!(
            "change the type of \"{column}\" (text, varchar, uuid, jsonb, integers ... map), or set {} to another column",
            key_for_fix(key, spec)
        ),
        _ => "fix the outbox table or the [router] settings".to_owned(),
    }
}

/// Distinct values of the route column `route` currently in the outbox
/// table `spec`, at most [`ROUTE_VALUE_LIMIT`].
pub(super) async fn read_route_values(
    client: &Client,
    timeout: Duration,
    spec: &OutboxTableSpec,
    route: &str,
) -> Result<Vec<String>, CheckError> {
    read(
        "the outbox's route values",
        timeout,
        preflight::route_values(client, &spec.schema, &spec.table, route, ROUTE_VALUE_LIMIT),
    )
    .await
}
