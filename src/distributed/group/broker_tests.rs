//! The group client against a real Kafka broker (`WALRELAY_TEST_KAFKA`,
//! skipped with a notice when unset): several members in one process, each
//! driven as a worker would (run what is assigned, stop what is revoked,
//! announce it and rejoin), with walrelay's assignor over four connectors.
//! Checks that every connector has exactly one owner, that no connector is
//! ever held by two live members, and measures (prints) how long a crashed
//! or departing member's connectors take to move.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::assign::assign;
use super::{
    spawn, Assignor, GroupConfig, GroupEvent, GroupHandle, JoinState, LeaderAssignment, MemberInfo,
};

/// The connectors every test spreads.
const NAMES: [&str; 4] = ["c0", "c1", "c2", "c3"];

/// walrelay's assignor over [`NAMES`], config offset 0.
struct Fixed;

impl Assignor for Fixed {
    fn assign(&self, members: &[MemberInfo]) -> LeaderAssignment {
        let names: Vec<String> = NAMES.iter().map(ToString::to_string).collect();
        assign(members, &names, 0)
    }
}

/// What the live members run, and every double ownership seen.
#[derive(Debug, Default)]
struct World {
    /// Per member label: what it runs.
    running: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// Double ownerships seen.
    violations: Mutex<Vec<String>>,
    /// Revocations seen.
    revocations: Mutex<usize>,
}

impl World {
    /// Records that `label` runs `now`, checking no other live member does.
    fn set(&self, label: &str, now: BTreeSet<String>) {
        let mut running = self.running.lock().unwrap();
        for (other, theirs) in running.iter() {
            if other != label {
                for c in theirs.intersection(&now) {
                    self.violations
                        .lock()
                        .unwrap()
                        .push(format!("{c} on {label} and {other}"));
                }
            }
        }
        running.insert(label.to_string(), now);
    }

    /// Forgets a member (dead or gone).
    fn remove(&self, label: &str) {
        self.running.lock().unwrap().remove(label);
    }

    /// Every name owned by exactly one live member, owners one apart.
    fn settled(&self, members: usize) -> bool {
        let running = self.running.lock().unwrap();
        let mut owners: BTreeMap<&str, usize> = BTreeMap::new();
        for r in running.values() {
            for c in r {
                *owners.entry(c).or_default() += 1;
            }
        }
        let counts: Vec<usize> = running.values().map(BTreeSet::len).collect();
        running.len() == members
            && NAMES.iter().all(|n| owners.get(n) == Some(&1))
            && owners.len() == NAMES.len()
            && counts
                .iter()
                .max()
                .zip(counts.iter().min())
                .is_some_and(|(a, b)| a - b <= 1)
    }

    /// A printable copy.
    fn show(&self) -> String {
        format!("{:?}", self.running.lock().unwrap())
    }
}

/// One member and the worker loop driving it.
struct Node {
    /// Its label (also its client id).
    label: String,
    /// The group handle.
    handle: GroupHandle,
    /// Shutdown for it.
    shutdown: watch::Sender<bool>,
    /// The worker loop.
    driver: JoinHandle<()>,
}

/// The test broker, or `None` (with a notice) when unset.
fn broker(test: &str) -> Option<String> {
    let b = std::env::var("WALRELAY_TEST_KAFKA").ok();
    if b.is_none() {
        eprintln!("WALRELAY_TEST_KAFKA unset: skipping {test}");
    }
    b
}

/// A group id no other run uses.
fn unique_group(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("walrelay-test-{test}-{}-{nanos}", std::process::id())
}

/// Starts member `label` of `group`: short session timeout (6 s, the
/// broker's minimum by default), 1 s heartbeats.
fn start(broker: &str, group: &str, label: &str, world: &Arc<World>) -> Node {
    let mut config = GroupConfig::new(vec![broker.to_string()], group);
    config.client_id = label.to_string();
    config.session_timeout = Duration::from_millis(6000);
    config.rebalance_timeout = Duration::from_millis(20_000);
    config.heartbeat_interval = Duration::from_millis(1000);
    let (state_tx, state_rx) = watch::channel(JoinState {
        url: format!("http://{label}:8083/"),
        config_offset: 0,
        running: Vec::new(),
    });
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (handle, mut events) = spawn(config, state_rx, Arc::new(Fixed), shutdown_rx);
    let (world, me, rejoiner) = (world.clone(), label.to_string(), handle.clone());
    let driver = tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            match ev {
                GroupEvent::Assigned(a) => {
                    assert_eq!(rejoiner.member_id().as_deref(), Some(a.member_id.as_str()));
                    // Stop the revoked, run the rest, announce, rejoin.
                    world.set(&me, a.assigned.iter().cloned().collect());
                    state_tx.send_modify(|s| s.running = a.assigned.clone());
                    if !a.revoked.is_empty() {
                        *world.revocations.lock().unwrap() += 1;
                        rejoiner.rejoin();
                    }
                }
                GroupEvent::Lost { reason } => {
                    eprintln!("{me}: membership lost: {reason}");
                    world.set(&me, BTreeSet::new());
                    state_tx.send_modify(|s| s.running.clear());
                }
            }
        }
    });
    Node {
        label: label.to_string(),
        handle,
        shutdown,
        driver,
    }
}

/// Waits until [`World::settled`] for `members`; the time it took.
async fn settle(world: &World, members: usize, what: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while !world.settled(members) {
        assert!(
            start.elapsed() < limit,
            "{what}: not settled after {limit:?}: {}",
            world.show()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

/// Kills a member: no LeaveGroup, its connectors count as stopped.
fn crash(node: Node, world: &World) {
    node.handle.abort();
    node.driver.abort();
    world.remove(&node.label);
}

/// Stops a member cleanly (it stops its connectors, then leaves).
async fn stop(node: Node, world: &World) {
    world.remove(&node.label);
    let _ = node.shutdown.send(true);
    node.handle.finished().await;
    node.driver.abort();
}

/// Asserts nothing ever ran twice.
fn no_violations(world: &World) {
    let v = world.violations.lock().unwrap();
    assert!(v.is_empty(), "connectors on two members at once: {v:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_member_is_replaced_after_the_session_timeout() {
    let Some(b) = broker("crashed_member_is_replaced_after_the_session_timeout") else {
        return;
    };
    let group = unique_group("crash");
    let world = Arc::new(World::default());
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|l| start(&b, &group, l, &world))
        .collect();
    let t = settle(&world, 3, "three members", Duration::from_secs(60)).await;
    eprintln!("three members settled in {t:?}: {}", world.show());
    let mut nodes = nodes.into_iter();
    let (a, bn, c) = (
        nodes.next().unwrap(),
        nodes.next().unwrap(),
        nodes.next().unwrap(),
    );
    let t0 = Instant::now();
    crash(c, &world);
    settle(&world, 2, "after the crash", Duration::from_secs(40)).await;
    let t = t0.elapsed();
    eprintln!(
        "MEASURED crash -> reassignment: {t:?} (session timeout 6 s): {}",
        world.show()
    );
    no_violations(&world);
    stop(a, &world).await;
    stop(bn, &world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_member_gets_a_share_and_leaving_member_hands_over() {
    let Some(b) = broker("joining_member_gets_a_share_and_leaving_member_hands_over") else {
        return;
    };
    let group = unique_group("join-leave");
    let world = Arc::new(World::default());
    let mut nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|l| start(&b, &group, l, &world))
        .collect();
    let t = settle(&world, 3, "three members", Duration::from_secs(60)).await;
    eprintln!("three members settled in {t:?}: {}", world.show());
    let before = *world.revocations.lock().unwrap();
    nodes.push(start(&b, &group, "d", &world));
    let t = settle(&world, 4, "a fourth member", Duration::from_secs(60)).await;
    let revocations = *world.revocations.lock().unwrap() - before;
    eprintln!(
        "MEASURED join -> share: {t:?}, {revocations} revocation(s): {}",
        world.show()
    );
    assert!(
        revocations >= 1,
        "the fourth member's share came through a revocation round"
    );
    no_violations(&world);
    let d = nodes.pop().unwrap();
    let t0 = Instant::now();
    stop(d, &world).await;
    settle(&world, 3, "after a clean leave", Duration::from_secs(30)).await;
    let t = t0.elapsed();
    eprintln!(
        "MEASURED LeaveGroup -> reassignment: {t:?}: {}",
        world.show()
    );
    assert!(
        t < Duration::from_secs(6),
        "a clean leave hands over before any session timeout"
    );
    no_violations(&world);
    for n in nodes {
        stop(n, &world).await;
    }
}
