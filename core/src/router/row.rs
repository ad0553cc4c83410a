//! One row (or message) being routed: reading its cells as text or as
//! Connect values with the event's error context, and the direct path
//! where a `toString`-style converter prints the text as it is. Never
//! does I/O or logs.

use bytes::Bytes;
use walrelay_proto::pgoutput::{ColumnValue, TupleData};

use super::config::NullPolicy;
use super::{message, BoundColumn, BoundRelation, EventMeta, RouteError};
use crate::connect::convert::ConvertError;
use crate::connect::pg::{self, PgType};
use crate::connect::Value;

/// Output bytes that follow from the text alone (the fast path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direct {
    /// The PostgreSQL text is the output.
    Text,
    /// `t`/`f` become `true`/`false`.
    Bool,
}

/// Whether a `StringConverter` or `SimpleHeaderConverter` renders this
/// column's non-null value as its PostgreSQL text (Java's `toString` of a
/// String or an integer is the text PostgreSQL sends).
fn direct(pg: PgType) -> Option<Direct> {
    match pg {
        PgType::Text | PgType::Int2 | PgType::Int4 | PgType::Int8 => Some(Direct::Text),
        PgType::Bool => Some(Direct::Bool),
        _ => None,
    }
}

/// One row being routed, with its error context.
pub(super) struct Row<'a> {
    pub(super) bound: &'a BoundRelation,
    pub(super) row: &'a TupleData,
    pub(super) meta: &'a EventMeta,
    /// A message's members, which stand in for `row` when set.
    pub(super) cells: Option<&'a [message::Cell]>,
}

impl Row<'_> {
    pub(super) fn event_id(&self) -> String {
        if let Some(cells) = self.cells {
            return cells
                .get(self.bound.id.index)
                .and_then(|c| c.text.as_ref())
                .map_or_else(
                    || "unknown".to_owned(),
                    |b| String::from_utf8_lossy(b).into_owned(),
                );
        }
        match self.row.get(self.bound.id.index) {
            Some(ColumnValue::Text(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => "unknown".to_owned(),
        }
    }

    /// The text of a column; `None` for NULL.
    pub(super) fn raw(&self, c: &BoundColumn) -> Result<Option<&Bytes>, RouteError> {
        if let Some(cells) = self.cells {
            return Ok(cells.get(c.index).and_then(|cell| cell.text.as_ref()));
        }
        match self.row.get(c.index) {
            None => Err(RouteError::ShortRow {
                column: self.bound.column_name(c.index),
                index: c.index,
                width: self.row.len(),
                lsn: self.meta.lsn,
            }),
            Some(ColumnValue::Text(b)) => Ok(Some(b)),
            Some(ColumnValue::Null) => Ok(None),
            Some(ColumnValue::UnchangedToast) => Err(RouteError::UnchangedToast {
                column: c.name.to_string(),
                lsn: self.meta.lsn,
                event_id: self.event_id(),
            }),
            Some(ColumnValue::Binary(_)) => Err(RouteError::BinaryValue {
                column: c.name.to_string(),
                lsn: self.meta.lsn,
                event_id: self.event_id(),
            }),
        }
    }

    /// The Connect value as stored in the `after` struct (`getInt32` and
    /// friends: no default).
    pub(super) fn value(&self, c: &BoundColumn) -> Result<Value, RouteError> {
        if let Some(cells) = self.cells {
            return Ok(cells
                .get(c.index)
                .map_or(Value::Null, |cell| cell.value.clone()));
        }
        match self.raw(c)? {
            None => Ok(Value::Null),
            Some(text) => {
                let v = pg::decode(c.ty.pg, text).map_err(|source| RouteError::InvalidValue {
                    column: c.name.to_string(),
                    lsn: self.meta.lsn,
                    event_id: self.event_id(),
                    source,
                })?;
                if v == Value::Null {
                    // A value the column's mode has no form for (numeric
                    // NaN under `precise`, a timestamp beyond nanoseconds):
                    // null, as Debezium publishes it after logging it,
                    // unless `router.numeric_nan` refuses a NaN.
                    if self.bound.numeric_nan == NullPolicy::Error && pg::is_special_numeric(text) {
                        return Err(RouteError::InvalidValue {
                            column: c.name.to_string(),
                            lsn: self.meta.lsn,
                            event_id: self.event_id(),
                            source: pg::unrepresentable(text),
                        });
                    }
                    tracing::warn!(
                        column = %c.name,
                        lsn = %self.meta.lsn,
                        event_id = %self.event_id(),
                        value = %String::from_utf8_lossy(text),
                        "the value has no form under the column's handling mode; published as null (or the column's default), as Debezium does"
                    );
                }
                Ok(v)
            }
        }
    }

    /// `Struct.get(field)`: null becomes the schema's default.
    pub(super) fn get(&self, c: &BoundColumn) -> Result<Value, RouteError> {
        let v = self.value(c)?;
        Ok(match (&v, &c.ty.schema.default) {
            (Value::Null, Some(d)) => d.clone(),
            _ => v,
        })
    }

    pub(super) fn convert(
        &self,
        what: &str,
        result: Result<Option<Bytes>, ConvertError>,
    ) -> Result<Option<Bytes>, RouteError> {
        result.map_err(|source| RouteError::Convert {
            what: what.to_owned(),
            lsn: self.meta.lsn,
            event_id: self.event_id(),
            source,
        })
    }

    /// A `toString`-style converter's output: the text itself where that is
    /// what Java would print, otherwise through `general` on `Struct.get`.
    #[inline]
    pub(super) fn direct(
        &self,
        c: &BoundColumn,
        general: impl FnOnce(&Value) -> Result<Option<Bytes>, ConvertError>,
        what: &str,
    ) -> Result<Option<Bytes>, RouteError> {
        match (direct(c.ty.pg), self.raw(c)?) {
            (Some(Direct::Text), Some(text)) => return Ok(Some(text.clone())),
            (Some(Direct::Bool), Some(text)) if text.as_ref() == b"t" => {
                return Ok(Some(Bytes::from_static(b"true")))
            }
            (Some(Direct::Bool), Some(text)) if text.as_ref() == b"f" => {
                return Ok(Some(Bytes::from_static(b"false")))
            }
            (Some(_), None) if c.ty.schema.default.is_none() => return Ok(None),
            _ => {}
        }
        let v = self.get(c)?;
        self.convert(what, general(&v))
    }
}
