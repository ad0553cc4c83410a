//! Transaction metadata (`outbox.transaction_metadata`, Debezium's
//! `provide.transaction.metadata`) under SIGKILL: every transaction's BEGIN
//! and END reach Kafka with its events, and the slot is never confirmed
//! past a transaction whose END Kafka did not acknowledge.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use common::relay::{commit_ends, event_id, read_until_ids, Outbox, Relay, WAIT};
use common::{create_topic, read_to_end, Record};
use walrelay::proto::Lsn;

/// Transactions the writer commits, and events in each.
const TXNS: u64 = 400;
const PER_TXN: u64 = 10;

/// One BEGIN or END record as StringConverter wrote it
/// (`Struct{status=END,id=<xid>:<lsn>,...}`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Marker {
    end: bool,
    xid: u64,
    lsn: u64,
    /// END: `event_count` and the `data_collections` text.
    counts: Option<(u64, String)>,
}

fn parse(r: &Record) -> Marker {
    let value = String::from_utf8_lossy(r.value.as_deref().expect("a value")).into_owned();
    let key = String::from_utf8_lossy(r.key.as_deref().expect("a key")).into_owned();
    let re = regex::Regex::new(
        r"^Struct\{status=(BEGIN|END),id=([0-9]+):([0-9]+)(?:,event_count=([0-9]+),data_collections=(\[.*\]))?,ts_ms=[0-9]+\}$",
    )
    .expect("valid regex");
    let c = re
        .captures(&value)
        .unwrap_or_else(|| panic!("not a transaction record: {value}"));
    assert_eq!(
        key,
        format!("Struct{{id={}:{}}}", &c[2], &c[3]),
        "key of {value}"
    );
    assert!(
        r.headers.is_empty(),
        "Debezium's transaction records have no headers"
    );
    Marker {
        end: &c[1] == "END",
        xid: c[2].parse().expect("xid"),
        lsn: c[3].parse().expect("lsn"),
        counts: c
            .get(4)
            .map(|n| (n.as_str().parse().expect("count"), c[5].to_string())),
    }
}

/// The writer's transactions (those counting events of `table`), by xid,
/// in topic order.
fn ours(records: &[Record], table: &str) -> BTreeMap<u64, Vec<Marker>> {
    let all: Vec<Marker> = records.iter().map(parse).collect();
    let xids: HashSet<u64> = all
        .iter()
        .filter(|m| m.counts.as_ref().is_some_and(|(_, c)| c.contains(table)))
        .map(|m| m.xid)
        .collect();
    let mut by = BTreeMap::<u64, Vec<Marker>>::new();
    for m in all.into_iter().filter(|m| xids.contains(&m.xid)) {
        by.entry(m.xid).or_default().push(m);
    }
    by
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_keeps_begin_and_end_with_their_events() {
    let ob = Outbox::new("txmeta_kill").await;
    let topic = format!("{}.transaction", ob.name);
    // One partition: the order of BEGIN and END is what a consumer reads.
    create_topic(&topic, 1).await;
    let config = ob
        .config_with(
            &common::kafka_bootstrap(),
            &format!(
                "[debezium]\ntopic_prefix = \"{}\"\n\n[metrics]\nlisten = \"127.0.0.1:0\"\n",
                ob.name
            ),
        )
        .replace("[outbox]\n", "[outbox]\ntransaction_metadata = true\n");
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    // A probe slot on the same publication: the commit end LSN of every
    // writer transaction.
    let probe = ob.create_probe().await;
    let writer = ob.spawn_writer(TXNS, PER_TXN, 7, Some(5));
    let table = format!("public.{}", ob.name);
    // Kill once some but not all transactions made it.
    let deadline = Instant::now() + WAIT;
    loop {
        let ends = ours(&read_to_end(&topic, WAIT).await, &table)
            .values()
            .filter(|ms| ms.iter().any(|m| m.end))
            .count();
        if ends >= 40 {
            break;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "no progress before the kill:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    relay.kill();
    // Dead: the slot's position is what it confirmed, and every one of our
    // transactions committed before it must have its END in Kafka already.
    let confirmed = ob.slot_confirmed().await.expect("slot");
    let before = ours(&read_to_end(&topic, WAIT).await, &table);
    let ended_before: HashSet<u64> = before
        .iter()
        .filter(|(_, ms)| ms.iter().any(|m| m.end))
        .map(|(x, _)| *x)
        .collect();
    let ends_before: HashSet<u64> = before
        .values()
        .flatten()
        .filter(|m| m.end)
        .map(|m| m.lsn)
        .collect();
    for (xid, ms) in &before {
        if ms.iter().any(|m| m.end) {
            assert!(
                !ms[0].end,
                "xid {xid}: END without a BEGIN before it: {ms:?}"
            );
        }
    }
    let commits = commit_ends(&ob.client, &probe, &ob.name).await;
    let confirmed_commits: Vec<Lsn> = commits
        .iter()
        .copied()
        .filter(|c| *c <= confirmed)
        .collect();
    assert!(
        !confirmed_commits.is_empty(),
        "nothing confirmed before the kill (slot at {confirmed})"
    );
    for c in &confirmed_commits {
        assert!(
            ends_before.contains(&c.0),
            "the slot was confirmed at {confirmed}, past the commit at {c}, whose END never reached Kafka"
        );
    }
    let mut relay = relay.kill_and_restart();
    writer.await.expect("writer");

    let want: HashSet<String> = (1..=TXNS * PER_TXN).map(event_id).collect();
    read_until_ids(&ob.topic(""), &want, &mut relay).await;
    // Every transaction's END, after its events.
    let deadline = Instant::now() + Duration::from_secs(180);
    let after = loop {
        let by = ours(&read_to_end(&topic, WAIT).await, &table);
        let ended = by
            .values()
            .filter(|ms| ms.last().is_some_and(|m| m.end))
            .count();
        if ended as u64 >= TXNS {
            break by;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "{ended} of {TXNS} transactions ended after 180 s:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(after.len() as u64, TXNS, "one xid per writer transaction");
    let commits = commit_ends(&ob.client, &probe, &ob.name).await;
    ob.drop_probe(&probe).await;
    assert_eq!(commits.len() as u64, TXNS, "the probe saw every commit");
    let expected = format!("[Struct{{data_collection={table},event_count={PER_TXN}}}]");
    let mut last_end = Lsn::ZERO;
    let mut repeated = 0;
    for (xid, ms) in &after {
        // BEGIN first, END last; a transaction delivered again comes whole
        // again: its BEGIN before each END, never an END alone.
        assert!(!ms[0].end, "xid {xid} starts with END: {ms:?}");
        assert!(
            ms.last().expect("records").end,
            "xid {xid} ends without END: {ms:?}"
        );
        let begins: Vec<u64> = ms.iter().filter(|m| !m.end).map(|m| m.lsn).collect();
        let ends: Vec<&Marker> = ms.iter().filter(|m| m.end).collect();
        assert!(
            begins.len() >= ends.len(),
            "xid {xid}: an END alone: {ms:?}"
        );
        for w in ms.windows(2) {
            assert!(
                !(w[0].end && w[1].end),
                "xid {xid}: END twice in a row: {ms:?}"
            );
        }
        // Every copy says the same: same positions, all ten events counted.
        assert!(begins.iter().all(|l| *l == begins[0]), "xid {xid}: {ms:?}");
        for e in &ends {
            assert_eq!(e.lsn, ends[0].lsn, "xid {xid}: {ms:?}");
            assert_eq!(e.counts, Some((PER_TXN, expected.clone())), "xid {xid}");
            assert!(e.lsn > begins[0], "xid {xid}: END before BEGIN in the WAL");
        }
        // Those whose END Kafka had before the kill were not sent again
        // unless the slot had not been confirmed past them.
        if ended_before.contains(xid) && ends.len() > 1 {
            repeated += 1;
            assert!(
                Lsn(ends[0].lsn) > confirmed,
                "xid {xid} (END at {}) was confirmed ({confirmed}) yet sent again",
                ends[0].lsn
            );
        }
        assert!(
            commits.contains(&Lsn(ends[0].lsn)),
            "xid {xid}: END at {}, not a commit of the writer",
            ends[0].lsn
        );
        last_end = last_end.max(Lsn(ends[0].lsn));
    }
    eprintln!("{repeated} transactions delivered again after the kill");
    // Everything acknowledged: the slot moves past the last END.
    ob.wait_confirmed(last_end, &relay).await;
    ob.finish(relay).await;
}
