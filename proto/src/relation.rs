//! The per-session cache of relation descriptions.
//!
//! Owns [`RelationCache`]: pgoutput announces each relation with a Relation
//! message before its first change in a session (and again after a schema
//! change), and later changes refer to it only by OID. The cache turns those
//! announcements into owned, shareable [`RelationInfo`]s. It must never
//! outlive a replication session: OIDs are re-announced on each new session
//! and a stale entry would describe columns that no longer exist.

use std::collections::HashMap;
use std::sync::Arc;

use crate::pgoutput::Relation;

/// A resolved relation: schema, table and columns; owned Strings (decoded lossily from UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationInfo {
    /// Relation OID.
    pub id: u32,
    /// Schema name.
    pub namespace: String,
    /// Table name.
    pub name: String,
    /// Replica identity setting: `d`, `n`, `f` or `i`.
    pub replica_identity: u8,
    /// The published columns, in tuple order.
    pub columns: Vec<RelationColumnInfo>,
}

/// One column of a [`RelationInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumnInfo {
    /// Column name.
    pub name: String,
    /// OID of the column's data type.
    pub type_oid: u32,
    /// Type modifier, -1 when none.
    pub type_modifier: i32,
    /// Part of the replica identity key.
    pub is_key: bool,
}

impl RelationInfo {
    /// Position of the column called `name` in the relation's tuples.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// `schema.table`, unquoted.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }
}

impl From<&Relation> for RelationInfo {
    fn from(rel: &Relation) -> Self {
        RelationInfo {
            id: rel.id,
            namespace: String::from_utf8_lossy(&rel.namespace).into_owned(),
            name: String::from_utf8_lossy(&rel.name).into_owned(),
            replica_identity: rel.replica_identity,
            columns: rel
                .columns
                .iter()
                .map(|c| RelationColumnInfo {
                    name: String::from_utf8_lossy(&c.name).into_owned(),
                    type_oid: c.type_oid,
                    type_modifier: c.type_modifier,
                    is_key: c.is_key(),
                })
                .collect(),
        }
    }
}

/// Rebuilt per replication session (relation ids are announced again on each new session).
#[derive(Debug, Default)]
pub struct RelationCache {
    relations: HashMap<u32, Arc<RelationInfo>>,
}

impl RelationCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a Relation message, replacing any earlier description of the
    /// same OID (a schema change re-announces it), and returns the entry.
    pub fn apply(&mut self, rel: &Relation) -> Arc<RelationInfo> {
        let info = Arc::new(RelationInfo::from(rel));
        self.relations.insert(rel.id, Arc::clone(&info));
        info
    }

    /// The description of relation `id`, if announced in this session.
    pub fn get(&self, id: u32) -> Option<&Arc<RelationInfo>> {
        self.relations.get(&id)
    }

    /// Forgets every relation (on a new session).
    pub fn clear(&mut self) {
        self.relations.clear();
    }

    /// Number of relations known.
    pub fn len(&self) -> usize {
        self.relations.len()
    }

    /// Whether no relation is known.
    pub fn is_empty(&self) -> bool {
        self.relations.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::pgoutput::RelationColumn;

    fn outbox(id: u32, extra_column: bool) -> Relation {
        let mut columns = vec![
            RelationColumn {
                flags: 1,
                name: Bytes::from_static(b"id"),
                type_oid: 2950,
                type_modifier: -1,
            },
            RelationColumn {
                flags: 0,
                name: Bytes::from_static(b"payload"),
                type_oid: 3802,
                type_modifier: -1,
            },
        ];
        if extra_column {
            columns.push(RelationColumn {
                flags: 0,
                name: Bytes::from_static(b"caf\xC3\xA9\xFF"),
                type_oid: 1043,
                type_modifier: 259,
            });
        }
        Relation {
            xid: None,
            id,
            namespace: Bytes::from_static(b"public"),
            name: Bytes::from_static(b"outbox"),
            replica_identity: b'd',
            columns,
        }
    }

    #[test]
    fn apply_get_replace_clear() {
        let mut cache = RelationCache::new();
        assert!(cache.is_empty());
        let info = cache.apply(&outbox(16385, false));
        assert_eq!(info.qualified_name(), "public.outbox");
        assert_eq!(info.column_index("payload"), Some(1));
        assert_eq!(info.column_index("missing"), None);
        assert_eq!(
            info.columns[0],
            RelationColumnInfo {
                name: "id".into(),
                type_oid: 2950,
                type_modifier: -1,
                is_key: true
            }
        );
        assert!(!info.columns[1].is_key);
        assert_eq!(cache.len(), 1);
        assert!(Arc::ptr_eq(cache.get(16385).unwrap(), &info));
        assert!(cache.get(1).is_none());

        // A re-announcement after ALTER TABLE replaces the entry.
        let info2 = cache.apply(&outbox(16385, true));
        assert_eq!(cache.len(), 1);
        assert_eq!(info2.columns.len(), 3);
        // Invalid UTF-8 is replaced, not rejected.
        assert_eq!(info2.columns[2].name, "café\u{FFFD}");
        assert_eq!(info2.columns[2].type_modifier, 259);
        assert_eq!(cache.get(16385).unwrap().columns.len(), 3);
        // The old Arc handed out earlier is unchanged.
        assert_eq!(info.columns.len(), 2);

        cache.apply(&outbox(16390, false));
        assert_eq!(cache.len(), 2);
        cache.clear();
        assert!(cache.is_empty());
        assert!(cache.get(16385).is_none());
    }
}
