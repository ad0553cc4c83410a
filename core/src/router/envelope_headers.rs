//! Headers copied from Debezium's change event before the router: a
//! `HeaderFrom$Value` ahead of the EventRouter with `operation=copy` and
//! fields among `source`, `op` and `transaction`, as Debezium's CloudEvents
//! documentation configures it for outbox records (the converter reads the
//! event's metadata back from those headers). walrelay builds no change
//! event, so it writes what the transform would have copied: the
//! PostgreSQL `source` block of the row, `op` `c`, and the (null)
//! `transaction` block, each with its schema. Never does I/O or logs.

use std::sync::Arc;

use super::{Headers, RouteError, Router, Row};
use crate::connect::message::{row_source, row_source_schema, RowSource};
use crate::connect::transforms::ConnectHeader;
use crate::connect::{Schema, Type, Value};

/// A field of Debezium's change event a header can be copied from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeField {
    /// `source`: where the change comes from.
    Source,
    /// `op`: `c` for an inserted outbox row.
    Op,
    /// `transaction`: null unless transaction metadata is provided.
    Transaction,
}

impl EnvelopeField {
    /// The field of that name.
    pub fn parse(name: &str) -> Option<EnvelopeField> {
        match name {
            "source" => Some(EnvelopeField::Source),
            "op" => Some(EnvelopeField::Op),
            "transaction" => Some(EnvelopeField::Transaction),
            _ => None,
        }
    }
}

/// What the router copies, and the schemas it copies them with.
#[derive(Debug, Clone)]
pub(super) struct EnvelopeHeaders {
    fields: Vec<(EnvelopeField, Arc<str>)>,
    database: Arc<str>,
    source_schema: Arc<Schema>,
    op_schema: Arc<Schema>,
    transaction_schema: Arc<Schema>,
}

impl Router {
    /// Copies `fields` of the change event into headers of those names
    /// (`(field, header)`, in order), for rows of the database `database`.
    /// Turns the router's Connect mode on.
    pub fn with_envelope_headers(
        mut self,
        fields: Vec<(EnvelopeField, String)>,
        database: &str,
    ) -> Self {
        if fields.is_empty() {
            return self;
        }
        let transaction = crate::connect::transaction::block_schema().with_optional(true);
        self.envelope_headers = Some(EnvelopeHeaders {
            fields: fields
                .into_iter()
                .map(|(f, h)| (f, Arc::from(h.as_str())))
                .collect(),
            database: Arc::from(database),
            source_schema: Arc::new(row_source_schema()),
            op_schema: Arc::new(Schema::new(Type::String)),
            transaction_schema: Arc::new(transaction),
        });
        self.key_direct = false;
        self.value_direct = false;
        self.header_direct = false;
        self
    }

    /// The copied headers of a table row (a message has none: walrelay
    /// copies from table rows only).
    pub(super) fn envelope_headers(
        &self,
        r: &Row<'_>,
        headers: &mut Headers,
    ) -> Result<(), RouteError> {
        let (Some(e), Headers::Connect(h), None) = (&self.envelope_headers, headers, r.cells)
        else {
            return Ok(());
        };
        let rel = &r.bound.relation;
        for (field, name) in &e.fields {
            let (schema, value) = match field {
                EnvelopeField::Source => (
                    &e.source_schema,
                    row_source(&RowSource {
                        server_name: &self.topic_prefix,
                        database: &e.database,
                        schema: &rel.namespace,
                        table: &rel.name,
                        commit_time_us: r.meta.commit_time_us,
                        last_commit_lsn: r.meta.last_commit_lsn,
                        lsn: r.meta.lsn,
                        xid: r.meta.xid,
                    }),
                ),
                EnvelopeField::Op => (&e.op_schema, Value::string("c")),
                EnvelopeField::Transaction => (&e.transaction_schema, Value::Null),
            };
            h.push(ConnectHeader {
                key: Arc::clone(name),
                schema: Some(Arc::clone(schema)),
                value,
            });
        }
        Ok(())
    }
}
