//! Transaction metadata as Debezium's `TransactionMonitor` keeps it: which
//! changes of a transaction count as its events, per data collection, and
//! when its BEGIN and END records go out.
//!
//! Owns the per-transaction counters and the [`Marker`]s; the assembler
//! calls it at every Begin, counted change and Commit, and hands the
//! markers on as events of the same transaction, so they are produced,
//! acknowledged and confirmed with it. It never renders bytes (that is
//! [`crate::connect::transaction`]) and never touches the tracker.
//!
//! What Debezium 3.6.1 counts (read and observed, `txmeta-*` cases): every
//! data-change event of the captured table it dispatches (INSERT, and the
//! DELETE and UPDATE events the EventRouter later drops; an UPDATE that
//! changes the primary key is a delete and a create, two events), minus the
//! operations in `skipped.operations`; and every logical decoding message
//! of an included prefix inside a transaction. BEGIN goes out at the Begin
//! message, END at the Commit, for every transaction pgoutput sends,
//! events or none. walrelay's own heartbeat message is no change of
//! Debezium's stream: a transaction holding nothing else gets no records.

use std::collections::HashMap;
use std::sync::Arc;

use walrelay_proto::Lsn;

use crate::connect::java::java_hash_map_order;
use crate::connect::transaction::{transaction_id, Block, Marker, TransactionTopic};

/// What Debezium's data collection of a logical decoding message prints
/// as before its identity hash: `LogicalDecodingMessageId` has no
/// `toString`, so `Object.toString` names the class and a new instance's
/// identity hash, one per message.
pub(crate) const MESSAGE_COLLECTION_CLASS: &str =
    "io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId";

/// The data collection of the logical decoding message at `lsn`, as
/// Debezium names it: every message is a collection of its own (its
/// `data_collection_order` is 1, its `data_collections` entry counts 1).
/// Debezium's identity hash is random per JVM run, so no relay can repeat
/// it; walrelay derives a 31-bit one from the LSN (the same on every
/// delivery of the transaction).
pub(crate) fn message_collection(lsn: Lsn) -> Arc<str> {
    // splitmix64's finaliser: a well-mixed, stable function of the LSN.
    let mut z = lsn.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // Java's identity hashes are 31 bits, never 0; Integer.toHexString.
    let hash = ((z as u32) & 0x7FFF_FFFF).max(1);
    Arc::from(format!("{MESSAGE_COLLECTION_CLASS}@{hash:x}"))
}

/// The pipeline's transaction metadata settings, resolved.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// Where BEGIN and END go and how they are converted.
    pub topic: Arc<TransactionTopic>,
    /// Whether UPDATE events of the outbox table count
    /// (`skipped.operations` without `u`).
    pub count_updates: bool,
    /// Whether DELETE events count (`skipped.operations` without `d`).
    pub count_deletes: bool,
}

/// The counters of the open transaction.
#[derive(Debug)]
pub(crate) struct Counts {
    xid: u32,
    begin_lsn: Lsn,
    ts_ms: i64,
    /// Whether the BEGIN marker was handed out.
    begun: bool,
    /// Whether walrelay's own heartbeat message was seen.
    heartbeat: bool,
    /// Whether anything else was.
    other: bool,
    total: u64,
    /// Per data collection in first-seen order.
    per: Vec<(Arc<str>, u64)>,
    /// Where a table's collection is in `per` (a message's collection is
    /// new every time and never looked up: a transaction of a million
    /// messages must not search a million entries per message).
    tables: HashMap<Arc<str>, usize>,
}

impl Counts {
    /// A transaction whose Begin message was at `begin_lsn`, committing at
    /// `commit_time_us` (Unix µs).
    pub(crate) fn new(xid: u32, begin_lsn: Lsn, commit_time_us: i64) -> Self {
        Counts {
            xid,
            begin_lsn,
            ts_ms: commit_time_us.div_euclid(1000),
            begun: false,
            heartbeat: false,
            other: false,
            total: 0,
            per: Vec::new(),
            tables: HashMap::new(),
        }
    }

    /// The BEGIN marker if it has not gone out yet: call before handing
    /// out anything of the transaction, and at any change but walrelay's
    /// heartbeat.
    pub(crate) fn begin(&mut self) -> Option<Marker> {
        self.other = true;
        if self.begun {
            return None;
        }
        self.begun = true;
        Some(Marker::Begin {
            id: transaction_id(self.xid, self.begin_lsn),
            ts_ms: self.ts_ms,
        })
    }

    /// Where the Begin message was.
    pub(crate) fn begin_lsn(&self) -> Lsn {
        self.begin_lsn
    }

    /// walrelay's own heartbeat message was in the transaction.
    pub(crate) fn heartbeat(&mut self) {
        self.heartbeat = true;
    }

    /// Counts one event of the table collection `collection` at `lsn`;
    /// returns its block.
    pub(crate) fn event(&mut self, collection: &Arc<str>, lsn: Lsn) -> Block {
        let n = match self.tables.get(collection) {
            Some(&i) => {
                self.per[i].1 += 1;
                self.per[i].1
            }
            None => {
                self.tables.insert(Arc::clone(collection), self.per.len());
                self.per.push((Arc::clone(collection), 1));
                1
            }
        };
        self.block(lsn, n)
    }

    /// Counts the logical decoding message at `lsn`, a data collection of
    /// its own ([`message_collection`]); returns its block.
    pub(crate) fn message_event(&mut self, lsn: Lsn) -> Block {
        self.per.push((message_collection(lsn), 1));
        self.block(lsn, 1)
    }

    /// The block of the next event, the `n`th of its collection.
    fn block(&mut self, lsn: Lsn, n: u64) -> Block {
        self.total += 1;
        Block {
            id: transaction_id(self.xid, lsn),
            total_order: self.total,
            data_collection_order: n,
        }
    }

    /// The markers at the Commit message found at `commit_lsn`: the BEGIN
    /// if it has not gone out, then the END; none for a transaction that
    /// held only walrelay's heartbeat.
    pub(crate) fn end(mut self, commit_lsn: Lsn) -> Vec<Marker> {
        if self.heartbeat && !self.other {
            return Vec::new();
        }
        let mut out: Vec<Marker> = self.begin().into_iter().collect();
        let per = java_hash_map_order(std::mem::take(&mut self.per));
        out.push(Marker::End {
            id: transaction_id(self.xid, commit_lsn),
            ts_ms: self.ts_ms,
            event_count: self.total,
            data_collections: per,
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::java::java_string_hash;

    #[test]
    fn begin_once_then_end_with_counts() {
        let table: Arc<str> = Arc::from("public.outbox");
        let mut c = Counts::new(771, Lsn(100), 1_500_999);
        assert!(
            matches!(c.begin(), Some(Marker::Begin { ref id, ts_ms: 1_500 }) if id == "771:100")
        );
        assert_eq!(c.begin(), None);
        let b = c.event(&table, Lsn(120));
        assert_eq!(
            (b.id.as_str(), b.total_order, b.data_collection_order),
            ("771:120", 1, 1)
        );
        c.event(&table, Lsn(130));
        let end = c.end(Lsn(200));
        assert_eq!(
            end,
            vec![Marker::End {
                id: "771:200".into(),
                ts_ms: 1_500,
                event_count: 2,
                data_collections: vec![(table, 2)],
            }]
        );
    }

    #[test]
    fn message_collections_look_like_debeziums_and_differ_per_message() {
        let a = message_collection(Lsn(39550792));
        let b = message_collection(Lsn(39550840));
        assert_ne!(a, b);
        let re = regex::Regex::new(
            r"^io\.debezium\.connector\.postgresql\.LogicalDecodingMessageMonitor\$LogicalDecodingMessageId@[1-7]?[0-9a-f]{1,7}$",
        )
        .unwrap();
        assert!(re.is_match(&a), "{a}");
        assert_eq!(a, message_collection(Lsn(39550792)), "stable per LSN");
    }

    #[test]
    fn a_transaction_of_only_walrelays_heartbeat_has_no_markers() {
        let mut c = Counts::new(5, Lsn(1), 0);
        c.heartbeat();
        assert!(c.end(Lsn(2)).is_empty());
        // Without events at all: BEGIN and END, as Debezium sends them.
        let c = Counts::new(5, Lsn(1), 0);
        let m = c.end(Lsn(2));
        assert_eq!(m.len(), 2);
        assert!(
            matches!(&m[1], Marker::End { event_count: 0, data_collections, .. } if data_collections.is_empty())
        );
    }

    /// `String.hashCode` written out: s[0]*31^(n-1) + ... + s[n-1].
    fn java_hash(s: &str) -> i32 {
        let mut h: i64 = 0;
        for c in s.encode_utf16() {
            h = (h * 31 + i64::from(c)) & 0xFFFF_FFFF;
        }
        h as u32 as i32
    }

    #[test]
    fn java_hash_map_order_of_strings() {
        // "Aa" and "BB" collide in Java; "public.outbox" hashes elsewhere.
        assert_eq!(java_string_hash("Aa"), java_string_hash("BB"));
        assert_eq!(
            java_string_hash("public.outbox"),
            java_hash("public.outbox")
        );
        let e = |s: &str| (Arc::<str>::from(s), 1u64);
        let order: Vec<String> = java_hash_map_order(vec![e("BB"), e("Aa"), e("b")])
            .into_iter()
            .map(|(k, _)| k.to_string())
            .collect();
        // "b" (98) is bucket 2, "Aa"/"BB" (2112) bucket 0, in insertion order.
        assert_eq!(order, ["BB", "Aa", "b"]);
    }
}
