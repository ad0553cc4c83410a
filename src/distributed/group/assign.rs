//! The leader's rule: an incremental cooperative assignor like Connect's,
//! without Connect's scheduled delay for departed workers (a departed
//! member's connectors are handed out in the same rebalance). A pure
//! function of the members' announcements, the connectors that exist and
//! the leader's config offset.
//!
//! The rule, in order (members sorted by id, connectors by name):
//! 1. any member ahead of the leader's config offset: everyone gets
//!    `CONFIG_MISMATCH` and keeps what it runs;
//! 2. a connector that no longer exists is revoked;
//! 3. a connector announced by several members stays with the one running
//!    the fewest (then the lowest id) and is revoked from the others;
//! 4. targets: `n` connectors over `m` members, `n mod m` members (those
//!    running the most, then lowest id) may run `ceil(n/m)`, the others
//!    `floor(n/m)`; a member above its target revokes its excess (the
//!    highest names), and those are assigned to nobody in this rebalance:
//!    the member stops them and rejoins, the next rebalance hands them on;
//! 5. every connector nobody runs goes to the member below its target with
//!    the fewest (then the lowest id).
//!
//! So a connector is never assigned to a member while another member
//! announces it: it never runs twice, given members announce what they
//! still run.

use std::collections::{BTreeMap, BTreeSet};

use super::wire::CONFIG_MISMATCH;
use super::{LeaderAssignment, MemberAssignment, MemberInfo};

/// What each member keeps and must stop, while the rule is applied.
#[derive(Debug, Default)]
struct Plan<'a> {
    /// Per member id: what it runs after the rebalance.
    kept: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// Per member id: what it must stop.
    revoked: BTreeMap<&'a str, BTreeSet<&'a str>>,
}

/// The assignment of `connectors` over `members`; see the module doc.
pub(crate) fn assign(
    members: &[MemberInfo],
    connectors: &[String],
    leader_offset: i64,
) -> LeaderAssignment {
    if let Some(ahead) = members.iter().find(|m| m.config_offset > leader_offset) {
        tracing::info!(
            member = %ahead.member_id,
            member_offset = ahead.config_offset,
            leader_offset,
            "a member has read the config topic further than the leader: CONFIG_MISMATCH"
        );
        return mismatch(members, leader_offset);
    }
    let existing: BTreeSet<&str> = connectors.iter().map(String::as_str).collect();
    let mut plan = Plan::default();
    for m in members {
        let kept = plan.kept.entry(&m.member_id).or_default();
        let revoked = plan.revoked.entry(&m.member_id).or_default();
        for c in &m.running {
            if existing.contains(c.as_str()) {
                kept.insert(c);
            } else {
                revoked.insert(c);
            }
        }
    }
    resolve_duplicates(&mut plan);
    let owned: BTreeSet<&str> = plan.kept.values().flatten().copied().collect();
    let targets = targets(&plan, existing.len());
    revoke_excess(&mut plan, &targets);
    let unowned: Vec<&str> = existing.difference(&owned).copied().collect();
    place(&mut plan, &targets, &unowned);
    LeaderAssignment {
        error: 0,
        config_offset: leader_offset,
        members: plan
            .kept
            .iter()
            .map(|(id, kept)| {
                let revoked = plan.revoked.get(id).cloned().unwrap_or_default();
                let a = MemberAssignment {
                    assigned: kept.iter().map(ToString::to_string).collect(),
                    revoked: revoked.iter().map(ToString::to_string).collect(),
                };
                (id.to_string(), a)
            })
            .collect(),
    }
}

/// `CONFIG_MISMATCH` for everyone, each keeping what it announced.
fn mismatch(members: &[MemberInfo], leader_offset: i64) -> LeaderAssignment {
    LeaderAssignment {
        error: CONFIG_MISMATCH,
        config_offset: leader_offset,
        members: members
            .iter()
            .map(|m| {
                let a = MemberAssignment {
                    assigned: m.running.clone(),
                    revoked: Vec::new(),
                };
                (m.member_id.clone(), a)
            })
            .collect(),
    }
}

/// Rule 3: a connector announced by several members stays with the one
/// running the fewest (counts before this step, then lowest id).
fn resolve_duplicates(plan: &mut Plan<'_>) {
    let counts: BTreeMap<&str, usize> = plan.kept.iter().map(|(m, k)| (*m, k.len())).collect();
    let mut owners: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (m, kept) in &plan.kept {
        for c in kept {
            owners.entry(c).or_default().push(m);
        }
    }
    for (c, os) in owners.into_iter().filter(|(_, os)| os.len() > 1) {
        let winner = os
            .iter()
            .min_by_key(|m| (counts.get(*m).copied().unwrap_or(0), **m))
            .copied();
        tracing::warn!(connector = c, members = ?os, keeper = ?winner, "a connector is run by several members");
        for m in os.into_iter().filter(|m| Some(*m) != winner) {
            plan.kept.entry(m).or_default().remove(c);
            plan.revoked.entry(m).or_default().insert(c);
        }
    }
}

/// Rule 4's targets: per member id, how many connectors it may run.
fn targets<'a>(plan: &Plan<'a>, n: usize) -> BTreeMap<&'a str, usize> {
    let m = plan.kept.len().max(1);
    let (q, r) = (n / m, n % m);
    let mut order: Vec<(&str, usize)> = plan.kept.iter().map(|(id, k)| (*id, k.len())).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    order
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (*id, q + usize::from(i < r)))
        .collect()
}

/// Rule 4's revocations: each member above its target stops its highest
/// names (assigned to nobody in this rebalance).
fn revoke_excess<'a>(plan: &mut Plan<'a>, targets: &BTreeMap<&'a str, usize>) {
    for (id, kept) in &mut plan.kept {
        let target = targets.get(id).copied().unwrap_or(0);
        while kept.len() > target {
            let Some(c) = kept.pop_last() else { break };
            plan.revoked.entry(id).or_default().insert(c);
        }
    }
}

/// Rule 5: each connector nobody runs goes to the member below its target
/// running the fewest (then lowest id); to the fewest overall if none is
/// below (cannot happen while targets add up to the connectors).
fn place<'a>(plan: &mut Plan<'a>, targets: &BTreeMap<&'a str, usize>, unowned: &[&'a str]) {
    for c in unowned {
        let below = plan
            .kept
            .iter()
            .filter(|(id, k)| k.len() < targets.get(*id).copied().unwrap_or(0))
            .min_by_key(|(id, k)| (k.len(), **id))
            .map(|(id, _)| *id);
        let pick = below.or_else(|| {
            plan.kept
                .iter()
                .min_by_key(|(id, k)| (k.len(), **id))
                .map(|(id, _)| *id)
        });
        if let Some(id) = pick {
            plan.kept.entry(id).or_default().insert(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A member announcing `running`.
    fn member(id: &str, running: &[&str]) -> MemberInfo {
        MemberInfo {
            member_id: id.into(),
            url: format!("http://{id}/"),
            config_offset: 0,
            running: running.iter().map(ToString::to_string).collect(),
        }
    }

    /// Connector names.
    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    /// (assigned, revoked) of one member.
    fn of<'a>(a: &'a LeaderAssignment, id: &str) -> (&'a [String], &'a [String]) {
        let m = &a.members[id];
        (&m.assigned, &m.revoked)
    }

    #[test]
    fn first_members_share_everything_at_once() {
        let a = assign(
            &[member("a", &[]), member("b", &[])],
            &names(&["1", "2", "3"]),
            0,
        );
        assert_eq!(of(&a, "a"), (&names(&["1", "3"])[..], &[][..]));
        assert_eq!(of(&a, "b"), (&names(&["2"])[..], &[][..]));
    }

    #[test]
    fn a_new_member_takes_a_share_in_two_rounds() {
        let all = names(&["1", "2", "3", "4"]);
        let r1 = assign(
            &[member("a", &["1", "2", "3", "4"]), member("b", &[])],
            &all,
            0,
        );
        assert_eq!(
            of(&r1, "a"),
            (&names(&["1", "2"])[..], &names(&["3", "4"])[..])
        );
        assert_eq!(
            of(&r1, "b"),
            (&[][..], &[][..]),
            "revoked ones go to nobody yet"
        );
        let r2 = assign(&[member("a", &["1", "2"]), member("b", &[])], &all, 0);
        assert_eq!(of(&r2, "a"), (&names(&["1", "2"])[..], &[][..]));
        assert_eq!(of(&r2, "b"), (&names(&["3", "4"])[..], &[][..]));
    }

    #[test]
    fn a_departed_members_connectors_spread_at_once() {
        let all = names(&["1", "2", "3", "4", "5", "6"]);
        // c (which ran 5 and 6) is gone.
        let a = assign(
            &[member("a", &["1", "2"]), member("b", &["3", "4"])],
            &all,
            0,
        );
        assert_eq!(of(&a, "a"), (&names(&["1", "2", "5"])[..], &[][..]));
        assert_eq!(of(&a, "b"), (&names(&["3", "4", "6"])[..], &[][..]));
    }

    #[test]
    fn removed_connectors_are_revoked() {
        let a = assign(&[member("a", &["1", "gone"])], &names(&["1"]), 0);
        assert_eq!(of(&a, "a"), (&names(&["1"])[..], &names(&["gone"])[..]));
    }

    #[test]
    fn a_connector_on_two_members_stays_with_the_one_running_fewer() {
        let all = names(&["1", "2", "3"]);
        let a = assign(
            &[member("a", &["1", "2", "3"]), member("b", &["3"])],
            &all,
            0,
        );
        assert_eq!(of(&a, "b"), (&names(&["3"])[..], &[][..]));
        assert_eq!(of(&a, "a"), (&names(&["1", "2"])[..], &names(&["3"])[..]));
    }

    #[test]
    fn a_member_ahead_of_the_leader_is_a_config_mismatch() {
        let mut ahead = member("b", &["2"]);
        ahead.config_offset = 10;
        let a = assign(&[member("a", &["1"]), ahead], &names(&["1", "2", "3"]), 5);
        assert_eq!(a.error, CONFIG_MISMATCH);
        assert_eq!(of(&a, "a"), (&names(&["1"])[..], &[][..]));
        assert_eq!(of(&a, "b"), (&names(&["2"])[..], &[][..]));
    }

    #[test]
    fn balance_reaches_one_apart_even_below_the_ceiling() {
        // 4 over 3: ceil is 2 and nobody is above it, yet c has none; the
        // second member at 2 gives one up.
        let all = names(&["1", "2", "3", "4"]);
        let r1 = assign(
            &[
                member("a", &["1", "2"]),
                member("b", &["3", "4"]),
                member("c", &[]),
            ],
            &all,
            0,
        );
        assert_eq!(of(&r1, "b"), (&names(&["3"])[..], &names(&["4"])[..]));
        let r2 = assign(
            &[
                member("a", &["1", "2"]),
                member("b", &["3"]),
                member("c", &[]),
            ],
            &all,
            0,
        );
        assert_eq!(of(&r2, "c"), (&names(&["4"])[..], &[][..]));
    }

    /// One step of a simulated group's life.
    #[derive(Debug, Clone)]
    enum Op {
        /// A member joins with nothing.
        Join,
        /// The i-th member (mod count) dies or leaves.
        Leave(usize),
        /// A connector is created.
        Create,
        /// The i-th connector (mod count) is deleted.
        Delete(usize),
        /// A rebalance.
        Round,
    }

    /// Random operations, rounds the most frequent.
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => Just(Op::Join),
            1 => any::<usize>().prop_map(Op::Leave),
            2 => Just(Op::Create),
            1 => any::<usize>().prop_map(Op::Delete),
            5 => Just(Op::Round),
        ]
    }

    /// A simulated group: what each live member runs, the connectors.
    #[derive(Debug, Default)]
    struct World {
        /// Per member id: what it runs.
        running: BTreeMap<String, BTreeSet<String>>,
        /// The connectors that exist.
        connectors: BTreeSet<String>,
        /// Ids handed out so far.
        next: usize,
    }

    impl World {
        /// One rebalance, applied by every member (stop revoked, run
        /// assigned); checks nothing is assigned to two members or to a
        /// member while another still runs it. Returns whether anything
        /// was revoked.
        fn round(&mut self) -> Result<bool, TestCaseError> {
            let members: Vec<MemberInfo> = self
                .running
                .iter()
                .map(|(id, r)| MemberInfo {
                    member_id: id.clone(),
                    url: String::new(),
                    config_offset: 0,
                    running: r.iter().cloned().collect(),
                })
                .collect();
            let all: Vec<String> = self.connectors.iter().cloned().collect();
            let a = assign(&members, &all, 0);
            let mut any_revoked = false;
            for (id, ma) in &a.members {
                for c in &ma.assigned {
                    for (other, runs) in &self.running {
                        prop_assert!(
                            other == id || !runs.contains(c),
                            "{c} to {id} while {other} runs it"
                        );
                    }
                }
                any_revoked |= !ma.revoked.is_empty();
            }
            for (id, ma) in a.members {
                self.running.insert(id, ma.assigned.into_iter().collect());
            }
            let mut seen = BTreeSet::new();
            for runs in self.running.values() {
                for c in runs {
                    prop_assert!(seen.insert(c.clone()), "{c} runs twice");
                }
            }
            Ok(any_revoked)
        }

        /// Applies one operation.
        fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
            match op {
                Op::Join => {
                    self.running
                        .insert(format!("m{:03}", self.next), BTreeSet::new());
                    self.next += 1;
                }
                Op::Leave(i) if !self.running.is_empty() => {
                    let id = self.running.keys().nth(i % self.running.len()).cloned();
                    if let Some(id) = id {
                        self.running.remove(&id);
                    }
                }
                Op::Create => {
                    self.connectors.insert(format!("c{:03}", self.next));
                    self.next += 1;
                }
                Op::Delete(i) if !self.connectors.is_empty() => {
                    let c = self
                        .connectors
                        .iter()
                        .nth(i % self.connectors.len())
                        .cloned();
                    if let Some(c) = c {
                        self.connectors.remove(&c);
                    }
                }
                Op::Round if !self.running.is_empty() => {
                    self.round()?;
                }
                _ => {}
            }
            Ok(())
        }
    }

    proptest! {
        #[test]
        fn never_twice_and_eventually_balanced(ops in proptest::collection::vec(op(), 1..60)) {
            let mut w = World::default();
            for op in &ops {
                w.apply(op)?;
            }
            if w.running.is_empty() {
                return Ok(());
            }
            // Quiet: rounds until nothing is revoked (a few suffice).
            let mut settled = false;
            for _ in 0..4 {
                if !w.round()? {
                    settled = true;
                    break;
                }
            }
            prop_assert!(settled, "still revoking after 4 rounds: {w:?}");
            let owned: BTreeSet<String> = w.running.values().flatten().cloned().collect();
            prop_assert_eq!(&owned, &w.connectors);
            let counts: Vec<usize> = w.running.values().map(BTreeSet::len).collect();
            let (min, max) = (counts.iter().min(), counts.iter().max());
            prop_assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "unbalanced: {w:?}");
        }
    }
}
