//! The membership task: finds the group coordinator (FindCoordinator over
//! the bootstrap list, again after NOT_COORDINATOR,
//! COORDINATOR_NOT_AVAILABLE or a lost connection, with backoff), joins
//! (JoinGroup with Connect's metadata, MEMBER_ID_REQUIRED answered by
//! rejoining with the given id), lets the leader's [`Assignor`] decide,
//! syncs (SyncGroup with Connect's assignment), heartbeats, rejoins on
//! REBALANCE_IN_PROGRESS keeping what it holds (cooperative), reports the
//! membership lost when fenced (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//! FENCED_INSTANCE_ID) or when no heartbeat succeeded for a session timeout,
//! and leaves the group (LeaveGroup) on shutdown. The state machine follows
//! Kafka's `AbstractCoordinator` and Connect's `WorkerCoordinator`.
//!
//! On the wire the assignment carries what is *new* for the member (as
//! Connect's leader sends it, and as a Connect worker adds it to what it
//! held); [`GroupEvent::Assigned`] gives the worker the whole set.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt as _;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::conn::{error_name, Api, Conn};
use super::wire::{self, ConnectAssignment};
use super::{Assignment, Assignor, GroupConfig, GroupEvent, JoinState, MemberInfo, Shared};

/// Kafka's `retry.backoff.ms` default: the first pause after a failure.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Kafka's `retry.backoff.max.ms` default: the longest pause.
const BACKOFF_MAX: Duration = Duration::from_millis(1000);
/// Added to the rebalance timeout for JoinGroup and SyncGroup (the
/// broker holds them up to that long), as Kafka's clients do.
const JOIN_LAPSE: Duration = Duration::from_secs(5);
/// The longest wait for LeaveGroup at shutdown.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the happy path stopped, and what to do next.
#[derive(Debug)]
enum Step {
    /// Join again, keeping member id and assignment.
    Rejoin(String),
    /// The membership is gone: report it lost, rejoin as a new member.
    Fenced(String),
    /// Find the coordinator again (after a pause).
    Rediscover(String),
    /// Pause, then carry on (join again if not joined).
    Retry(String),
    /// Shutdown was asked (or the worker dropped the events).
    Shutdown,
}

/// What this member holds after its last completed rebalance.
#[derive(Debug, Clone)]
struct Held {
    /// The whole assignment.
    assigned: Vec<String>,
    /// The leader's member id.
    leader_id: String,
    /// The leader's URL.
    leader_url: String,
    /// The assignment's config offset.
    config_offset: i64,
}

/// The membership task's state.
pub(crate) struct Member {
    /// The configuration.
    config: GroupConfig,
    /// What to announce.
    state: watch::Receiver<JoinState>,
    /// The leader's rule.
    assignor: Arc<dyn Assignor>,
    /// Turns true at shutdown.
    shutdown: watch::Receiver<bool>,
    /// To the worker.
    events: mpsc::Sender<GroupEvent>,
    /// Shared with the handle.
    shared: Arc<Shared>,
    /// The coordinator connection.
    conn: Option<Conn>,
    /// The member id ("" before the first join or after a fence).
    member_id: String,
    /// The generation (-1: none).
    generation: i32,
    /// In a completed generation (heartbeating) rather than joining.
    joined: bool,
    /// The last assignment, while held.
    held: Option<Held>,
    /// The last time the coordinator confirmed the membership.
    last_ok: Instant,
    /// When the next heartbeat is due.
    next_heartbeat: Instant,
    /// Failures in a row (for the backoff).
    failures: u32,
}

impl Member {
    /// A task that has not joined yet.
    pub(crate) fn new(
        config: GroupConfig,
        state: watch::Receiver<JoinState>,
        assignor: Arc<dyn Assignor>,
        shutdown: watch::Receiver<bool>,
        events: mpsc::Sender<GroupEvent>,
        shared: Arc<Shared>,
    ) -> Member {
        Member {
            config,
            state,
            assignor,
            shutdown,
            events,
            shared,
            conn: None,
            member_id: String::new(),
            generation: -1,
            joined: false,
            held: None,
            last_ok: Instant::now(),
            next_heartbeat: Instant::now(),
            failures: 0,
        }
    }

    /// Runs until shutdown, then leaves the group.
    pub(crate) async fn run(mut self) {
        if let Some(sasl) = &self.config.security.sasl {
            if let Err(e) = super::sasl::check_mechanism(&sasl.mechanism) {
                tracing::error!(group = %self.config.group_id, error = %e, "cannot join the group");
                let _ = self
                    .events
                    .send(GroupEvent::Lost {
                        reason: e.to_string(),
                    })
                    .await;
                return;
            }
        }
        info!(group = %self.config.group_id, "joining the Connect group");
        while !self.stopping() {
            match self.step().await {
                Ok(()) => self.failures = 0,
                Err(Step::Shutdown) => break,
                Err(step) => self.recover(step).await,
            }
        }
        self.leave().await;
    }

    /// Whether shutdown was asked or the worker stopped listening.
    fn stopping(&self) -> bool {
        *self.shutdown.borrow() || self.events.is_closed()
    }

    /// One step: connect if needed, then join or heartbeat.
    async fn step(&mut self) -> Result<(), Step> {
        if self.conn.is_none() {
            self.connect().await?;
        }
        if self.joined {
            self.heartbeat().await
        } else {
            self.join_and_sync().await
        }
    }

    /// Acts on a failed step.
    async fn recover(&mut self, step: Step) {
        match step {
            Step::Rejoin(why) => {
                debug!(group = %self.config.group_id, %why, "rejoining");
                self.joined = false;
            }
            Step::Fenced(why) => {
                warn!(group = %self.config.group_id, %why, "membership lost; rejoining as a new member");
                self.lose(why).await;
            }
            Step::Rediscover(why) => {
                warn!(group = %self.config.group_id, %why, "looking for the group coordinator again");
                self.conn = None;
                self.pause().await;
            }
            Step::Retry(why) => {
                warn!(group = %self.config.group_id, %why, "retrying");
                self.pause().await;
            }
            Step::Shutdown => {}
        }
        self.check_expiry().await;
    }

    /// Reports the membership lost (when anything is held) and forgets it.
    async fn lose(&mut self, reason: String) {
        self.member_id.clear();
        self.generation = -1;
        self.joined = false;
        self.set_shared_member(None);
        if self.held.take().is_some() {
            let _ = self.events.send(GroupEvent::Lost { reason }).await;
        }
    }

    /// Reports the membership lost when nothing confirmed it for a session
    /// timeout (the coordinator has dropped this member by now).
    async fn check_expiry(&mut self) {
        let session = self.config.session_timeout;
        if self.held.is_some() && self.last_ok.elapsed() >= session {
            let reason = format!(
                "no heartbeat succeeded for the session timeout ({} ms)",
                session.as_millis()
            );
            warn!(group = %self.config.group_id, %reason, "membership lost");
            self.lose(reason).await;
        }
    }

    /// The pause after a failure: exponential from 100 ms to 1 s, cut
    /// short by shutdown.
    async fn pause(&mut self) {
        let factor = 1u32 << self.failures.min(4);
        self.failures = self.failures.saturating_add(1);
        let wait = (BACKOFF_MIN * factor).min(BACKOFF_MAX);
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = until_true(&mut shutdown) => {}
        }
    }

    /// The timeout for connects and short requests: at most 10 s, and
    /// while an assignment is held no later than when it would expire.
    fn io_timeout(&self) -> Duration {
        let base = self
            .config
            .session_timeout
            .clamp(Duration::from_secs(1), Duration::from_secs(10));
        if self.held.is_none() {
            return base;
        }
        let left = self
            .config
            .session_timeout
            .saturating_sub(self.last_ok.elapsed());
        base.min(left.max(Duration::from_millis(500)))
    }

    /// Publishes the member id on the handle.
    fn set_shared_member(&self, id: Option<String>) {
        if let Ok(mut g) = self.shared.member_id.lock() {
            *g = id;
        }
    }

    /// Finds the coordinator through the bootstrap brokers and connects.
    async fn connect(&mut self) -> Result<(), Step> {
        let timeout = self.io_timeout();
        let mut why = String::from("no bootstrap servers");
        let n = self.config.bootstrap.len().max(1);
        for i in 0..self.config.bootstrap.len() {
            let broker = &self.config.bootstrap[(i + self.failures as usize) % n];
            match self.coordinator_via(broker, timeout).await {
                Ok(conn) => {
                    info!(group = %self.config.group_id, coordinator = conn.broker(), "found the group coordinator");
                    self.conn = Some(conn);
                    return Ok(());
                }
                Err(e) => why = e,
            }
        }
        Err(Step::Rediscover(format!(
            "no coordinator for group {}: {why}",
            self.config.group_id
        )))
    }

    /// Asks `broker` for the coordinator and connects to it.
    async fn coordinator_via(&self, broker: &str, timeout: Duration) -> Result<Conn, String> {
        let c = &self.config;
        let mut conn = Conn::open(broker, &c.client_id, &c.security, timeout)
            .await
            .map_err(|e| e.to_string())?;
        let addr = find_coordinator(&mut conn, &c.group_id, timeout).await?;
        if addr == broker {
            return Ok(conn);
        }
        Conn::open(&addr, &c.client_id, &c.security, timeout)
            .await
            .map_err(|e| e.to_string())
    }

    /// Sends a request built for the negotiated version, cut short by
    /// shutdown; a connection failure means rediscovery.
    async fn send<R: Api>(
        &mut self,
        build: impl FnOnce(i16) -> R,
        timeout: Duration,
    ) -> Result<R::Response, Step> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(Step::Rediscover("not connected".into()));
        };
        let version = conn
            .version::<R>()
            .map_err(|e| Step::Retry(e.to_string()))?;
        let req = build(version);
        let mut shutdown = self.shutdown.clone();
        let outcome = tokio::select! {
            r = conn.call(&req, version, timeout) => Some(r),
            () = until_true(&mut shutdown) => None,
        };
        match outcome {
            Some(Ok(resp)) => Ok(resp),
            Some(Err(e)) => {
                self.conn = None;
                Err(Step::Rediscover(e.to_string()))
            }
            None => {
                self.conn = None;
                Err(Step::Shutdown)
            }
        }
    }

    /// What to do about an error code of a group API.
    fn classify(&self, api: &str, code: i16) -> Step {
        let coordinator = self.conn.as_ref().map_or("?", |c| c.broker());
        let why = format!(
            "{api} to coordinator {coordinator}: {} ({code})",
            error_name(code)
        );
        match code {
            // UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID
            25 | 22 | 82 => Step::Fenced(why),
            // REBALANCE_IN_PROGRESS
            27 => Step::Rejoin(why),
            // COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
            15 | 16 => Step::Rediscover(why),
            _ => Step::Retry(why),
        }
    }

    /// What this member announces: the worker's state, with everything of
    /// the last assignment it may still run.
    fn announcement(&self) -> JoinState {
        let mut s = self.state.borrow().clone();
        let mut running: BTreeSet<String> = s.running.drain(..).collect();
        if let Some(h) = &self.held {
            running.extend(h.assigned.iter().cloned());
        }
        s.running = running.into_iter().collect();
        s
    }

    /// The allocation in the metadata: the held assignment, as Connect's
    /// worker sends its snapshot; null on a first join with nothing.
    fn allocation(&self, announced: &JoinState) -> Option<ConnectAssignment> {
        if self.held.is_none() && announced.running.is_empty() {
            return None;
        }
        let (leader, leader_url, config_offset) = match &self.held {
            Some(h) => (h.leader_id.clone(), h.leader_url.clone(), h.config_offset),
            None => (String::new(), String::new(), announced.config_offset),
        };
        Some(ConnectAssignment {
            version: 1,
            error: 0,
            leader,
            leader_url,
            config_offset,
            assigned: announced.running.clone(),
            revoked: Vec::new(),
            delay_ms: 0,
        })
    }

    /// JoinGroup, the leader's assignment when this member leads,
    /// SyncGroup, and the event.
    async fn join_and_sync(&mut self) -> Result<(), Step> {
        // A rejoin asked before this join is served by it.
        let _ = self.shared.rejoin.notified().now_or_never();
        let announced = self.announcement();
        let metadata = wire::encode_metadata(
            &announced.url,
            announced.config_offset,
            self.allocation(&announced).as_ref(),
        );
        let join = self.join(Bytes::from(metadata)).await?;
        let assignments = if join.leader == join.member_id {
            self.lead(&join, &announced)?
        } else {
            Vec::new()
        };
        let bytes = self.sync(assignments).await?;
        self.complete(&bytes, &announced).await
    }

    /// JoinGroup until the coordinator has given this member an id and a
    /// generation.
    async fn join(&mut self, metadata: Bytes) -> Result<JoinGroupResponse, Step> {
        let timeout = self.config.rebalance_timeout + JOIN_LAPSE;
        for _ in 0..3 {
            let c = &self.config;
            let (group, member) = (c.group_id.clone(), self.member_id.clone());
            let session = millis(c.session_timeout);
            let rebalance = millis(c.rebalance_timeout);
            let meta = metadata.clone();
            let build = move |v: i16| {
                let protocol = JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(wire::PROTOCOL_COMPATIBLE))
                    .with_metadata(meta);
                let req = JoinGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(group)))
                    .with_session_timeout_ms(session)
                    .with_rebalance_timeout_ms(rebalance)
                    .with_member_id(StrBytes::from_string(member))
                    .with_protocol_type(StrBytes::from_static_str(wire::PROTOCOL_TYPE))
                    .with_protocols(vec![protocol]);
                if v >= 8 {
                    req.with_reason(Some(StrBytes::from_static_str("walrelay worker joins")))
                } else {
                    req
                }
            };
            let resp = self.send(build, timeout).await?;
            match resp.error_code {
                0 => {
                    self.member_id = resp.member_id.to_string();
                    self.generation = resp.generation_id;
                    self.last_ok = Instant::now();
                    return Ok(resp);
                }
                // MEMBER_ID_REQUIRED: the id to join with is in the answer.
                79 => self.member_id = resp.member_id.to_string(),
                code => {
                    if code == 25 {
                        self.member_id.clear();
                    }
                    return Err(self.classify("JoinGroup", code));
                }
            }
        }
        Err(Step::Retry(
            "JoinGroup kept answering MEMBER_ID_REQUIRED".into(),
        ))
    }

    /// The leader's part: every member's metadata to the assignor, its
    /// decision to Connect assignments (new connectors only on the wire).
    fn lead(
        &self,
        join: &JoinGroupResponse,
        announced: &JoinState,
    ) -> Result<Vec<SyncGroupRequestAssignment>, Step> {
        let mut members = Vec::with_capacity(join.members.len());
        for m in &join.members {
            let md = wire::decode_metadata(&m.metadata).map_err(|e| {
                Step::Retry(format!(
                    "the metadata of member {}: {e}",
                    m.member_id.as_str()
                ))
            })?;
            let running: BTreeSet<String> = md
                .allocation
                .map(|a| a.assigned)
                .unwrap_or_default()
                .into_iter()
                .collect();
            members.push(MemberInfo {
                member_id: m.member_id.to_string(),
                url: md.url,
                config_offset: md.config_offset,
                running: running.into_iter().collect(),
            });
        }
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let decision = self.assignor.assign(&members);
        info!(group = %self.config.group_id, generation = self.generation, members = members.len(), error = decision.error, "leading the rebalance");
        let mut out = Vec::with_capacity(members.len());
        for m in &members {
            let mine = decision
                .members
                .get(&m.member_id)
                .cloned()
                .unwrap_or_default();
            let whole: BTreeSet<&String> = mine.assigned.iter().collect();
            let now: BTreeSet<&String> = m.running.iter().collect();
            let (assigned, revoked) = if decision.error != 0 {
                (Vec::new(), Vec::new())
            } else {
                let mut revoked: BTreeSet<String> = mine.revoked.iter().cloned().collect();
                revoked.extend(now.difference(&whole).map(|c| (*c).clone()));
                let new = whole.difference(&now).map(|c| (*c).clone()).collect();
                (new, revoked.into_iter().collect())
            };
            let a = ConnectAssignment {
                version: 1,
                error: decision.error,
                leader: self.member_id.clone(),
                leader_url: announced.url.clone(),
                config_offset: decision.config_offset,
                assigned,
                revoked,
                delay_ms: 0,
            };
            out.push(
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(m.member_id.clone()))
                    .with_assignment(Bytes::from(wire::encode_assignment(&a))),
            );
        }
        Ok(out)
    }

    /// SyncGroup: this member's assignment bytes.
    async fn sync(&mut self, assignments: Vec<SyncGroupRequestAssignment>) -> Result<Bytes, Step> {
        let timeout = self.config.rebalance_timeout + JOIN_LAPSE;
        let group = self.config.group_id.clone();
        let (member, generation) = (self.member_id.clone(), self.generation);
        let build = move |v: i16| {
            let req = SyncGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group)))
                .with_generation_id(generation)
                .with_member_id(StrBytes::from_string(member))
                .with_assignments(assignments);
            if v >= 5 {
                req.with_protocol_type(Some(StrBytes::from_static_str(wire::PROTOCOL_TYPE)))
                    .with_protocol_name(Some(StrBytes::from_static_str(wire::PROTOCOL_COMPATIBLE)))
            } else {
                req
            }
        };
        let resp = self.send(build, timeout).await?;
        if resp.error_code != 0 {
            return Err(self.classify("SyncGroup", resp.error_code));
        }
        self.last_ok = Instant::now();
        Ok(resp.assignment)
    }

    /// Turns the assignment into the whole set, holds it, tells the worker.
    async fn complete(&mut self, bytes: &[u8], announced: &JoinState) -> Result<(), Step> {
        let a = wire::decode_assignment(bytes).map_err(|e| {
            Step::Retry(format!(
                "the assignment of generation {}: {e}",
                self.generation
            ))
        })?;
        let revoked: BTreeSet<String> = if a.error == 0 {
            a.revoked.iter().cloned().collect()
        } else {
            BTreeSet::new()
        };
        let mut whole: BTreeSet<String> = announced.running.iter().cloned().collect();
        whole.retain(|c| !revoked.contains(c));
        if a.error == 0 {
            whole.extend(a.assigned.iter().cloned());
        }
        let assignment = Assignment {
            generation: self.generation,
            member_id: self.member_id.clone(),
            leader_id: a.leader.clone(),
            leader_url: a.leader_url.clone(),
            config_offset: a.config_offset,
            error: a.error,
            assigned: whole.into_iter().collect(),
            revoked: revoked.into_iter().collect(),
            delay_ms: a.delay_ms,
        };
        info!(group = %self.config.group_id, generation = self.generation, member = %self.member_id,
            assigned = ?assignment.assigned, revoked = ?assignment.revoked, error = a.error, "rebalance completed");
        self.held = Some(Held {
            assigned: assignment.assigned.clone(),
            leader_id: a.leader,
            leader_url: a.leader_url,
            config_offset: a.config_offset,
        });
        self.joined = true;
        self.next_heartbeat = Instant::now() + self.config.heartbeat_interval;
        self.set_shared_member(Some(self.member_id.clone()));
        self.events
            .send(GroupEvent::Assigned(assignment))
            .await
            .map_err(|_| Step::Shutdown)
    }

    /// Waits for the next heartbeat (or a rejoin request, or shutdown) and
    /// sends it.
    async fn heartbeat(&mut self) -> Result<(), Step> {
        let shared = self.shared.clone();
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            () = tokio::time::sleep_until(self.next_heartbeat) => {}
            () = shared.rejoin.notified() => return Err(Step::Rejoin("the worker asked".into())),
            () = until_true(&mut shutdown) => return Err(Step::Shutdown),
        }
        self.next_heartbeat = Instant::now() + self.config.heartbeat_interval;
        let group = self.config.group_id.clone();
        let (member, generation) = (self.member_id.clone(), self.generation);
        let build = move |_: i16| {
            HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group)))
                .with_generation_id(generation)
                .with_member_id(StrBytes::from_string(member))
        };
        let resp = self.send(build, self.io_timeout()).await?;
        match resp.error_code {
            0 => {
                self.last_ok = Instant::now();
                Ok(())
            }
            27 => {
                self.last_ok = Instant::now();
                Err(self.classify("Heartbeat", 27))
            }
            code => Err(self.classify("Heartbeat", code)),
        }
    }

    /// LeaveGroup, when this member has an id (best effort, bounded).
    async fn leave(&mut self) {
        self.set_shared_member(None);
        if self.member_id.is_empty() {
            return;
        }
        if self.conn.is_none() && self.connect().await.is_err() {
            warn!(group = %self.config.group_id, "no coordinator to leave the group with");
            return;
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let Ok(v) = conn.version::<LeaveGroupRequest>() else {
            return;
        };
        let group = GroupId(StrBytes::from_string(self.config.group_id.clone()));
        let member = StrBytes::from_string(self.member_id.clone());
        let req = if v >= 3 {
            let mut who = MemberIdentity::default().with_member_id(member);
            if v >= 5 {
                who = who.with_reason(Some(StrBytes::from_static_str("walrelay worker stops")));
            }
            LeaveGroupRequest::default()
                .with_group_id(group)
                .with_members(vec![who])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(group)
                .with_member_id(member)
        };
        match conn.call(&req, v, LEAVE_TIMEOUT).await {
            Ok(r) if r.error_code == 0 => {
                info!(group = %self.config.group_id, member = %self.member_id, "left the group");
            }
            Ok(r) => {
                warn!(group = %self.config.group_id, error = %error_name(r.error_code), "LeaveGroup refused");
            }
            Err(e) => warn!(group = %self.config.group_id, error = %e, "LeaveGroup failed"),
        }
    }
}

/// FindCoordinator (key type GROUP): the coordinator's `host:port`.
async fn find_coordinator(
    conn: &mut Conn,
    group: &str,
    timeout: Duration,
) -> Result<String, String> {
    let v = conn
        .version::<FindCoordinatorRequest>()
        .map_err(|e| e.to_string())?;
    let key = StrBytes::from_string(group.to_string());
    let req = if v >= 4 {
        FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![key])
    } else {
        FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_key(key)
    };
    let resp = conn
        .call(&req, v, timeout)
        .await
        .map_err(|e| e.to_string())?;
    let (code, message, host, port) = if v >= 4 {
        let Some(c) = resp.coordinators.first() else {
            return Err(format!(
                "broker {}: FindCoordinator answered no coordinator",
                conn.broker()
            ));
        };
        (
            c.error_code,
            c.error_message.clone(),
            c.host.clone(),
            c.port,
        )
    } else {
        (
            resp.error_code,
            resp.error_message.clone(),
            resp.host.clone(),
            resp.port,
        )
    };
    if code != 0 {
        return Err(conn
            .broker_error("FindCoordinator", code, message.as_ref())
            .to_string());
    }
    Ok(if host.contains(':') {
        format!("[{}]:{port}", host.as_str())
    } else {
        format!("{}:{port}", host.as_str())
    })
}

/// Milliseconds as Kafka's int32.
fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Resolves once `rx` is true; never if its sender is gone without it.
async fn until_true(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::group::{LeaderAssignment, MemberAssignment};
    use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
    use std::collections::BTreeMap;

    /// Gives every member exactly what the test says.
    struct Scripted(BTreeMap<String, MemberAssignment>);

    impl Assignor for Scripted {
        fn assign(&self, _: &[MemberInfo]) -> LeaderAssignment {
            LeaderAssignment {
                error: 0,
                config_offset: 42,
                members: self.0.clone(),
            }
        }
    }

    /// Strings.
    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    /// A member task that never runs, with its event receiver.
    fn member(assignor: Arc<dyn Assignor>) -> (Member, mpsc::Receiver<GroupEvent>) {
        let mut config = GroupConfig::new(vec!["127.0.0.1:1".into()], "g");
        config.session_timeout = Duration::from_millis(6000);
        let (_s, state) = watch::channel(JoinState::default());
        let (_d, shutdown) = watch::channel(false);
        let (tx, rx) = mpsc::channel(4);
        let m = Member::new(config, state, assignor, shutdown, tx, Arc::default());
        (m, rx)
    }

    #[tokio::test]
    async fn the_leader_sends_only_new_connectors_and_revokes_the_rest() {
        let script = BTreeMap::from([(
            "m1".to_string(),
            MemberAssignment {
                assigned: v(&["a", "c"]),
                revoked: v(&[]),
            },
        )]);
        let (mut m, _rx) = member(Arc::new(Scripted(script)));
        m.member_id = "m1".into();
        let held = ConnectAssignment {
            version: 1,
            assigned: v(&["a", "b"]),
            ..ConnectAssignment::default()
        };
        let meta = wire::encode_metadata("http://m1/", 42, Some(&held));
        let join =
            JoinGroupResponse::default().with_members(vec![JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_static_str("m1"))
                .with_metadata(Bytes::from(meta))]);
        let announced = JoinState {
            url: "http://m1/".into(),
            config_offset: 42,
            running: v(&["a", "b"]),
        };
        let out = m.lead(&join, &announced).unwrap();
        let a = wire::decode_assignment(&out[0].assignment).unwrap();
        // "b" is not in the whole set: revoked though the assignor did not
        // say so; "c" is new; "a" is kept (not repeated on the wire).
        assert_eq!((a.assigned, a.revoked), (v(&["c"]), v(&["b"])));
        assert_eq!(
            (a.leader.as_str(), a.leader_url.as_str(), a.config_offset),
            ("m1", "http://m1/", 42)
        );
    }

    #[tokio::test]
    async fn the_whole_set_is_what_was_announced_less_revoked_plus_new() {
        let (mut m, mut rx) = member(Arc::new(Scripted(BTreeMap::new())));
        let wire_assignment = ConnectAssignment {
            version: 1,
            leader: "L".into(),
            assigned: v(&["d"]),
            revoked: v(&["b"]),
            ..ConnectAssignment::default()
        };
        let announced = JoinState {
            running: v(&["a", "b"]),
            ..JoinState::default()
        };
        let bytes = wire::encode_assignment(&wire_assignment);
        m.complete(&bytes, &announced).await.unwrap();
        let Some(GroupEvent::Assigned(a)) = rx.recv().await else {
            panic!("no assignment")
        };
        assert_eq!((a.assigned, a.revoked), (v(&["a", "d"]), v(&["b"])));
        // The next announcement keeps what is held even if the worker has
        // not started it yet.
        assert_eq!(m.announcement().running, v(&["a", "d"]));
    }

    #[tokio::test(start_paused = true)]
    async fn no_heartbeat_for_a_session_timeout_is_a_lost_membership() {
        let (mut m, mut rx) = member(Arc::new(Scripted(BTreeMap::new())));
        let bytes = wire::encode_assignment(&ConnectAssignment {
            assigned: v(&["a"]),
            ..ConnectAssignment::default()
        });
        m.member_id = "m1".into();
        m.complete(&bytes, &JoinState::default()).await.unwrap();
        assert!(matches!(rx.recv().await, Some(GroupEvent::Assigned(_))));
        m.last_ok = Instant::now();
        tokio::time::advance(Duration::from_millis(5900)).await;
        m.check_expiry().await;
        assert!(rx.try_recv().is_err(), "not yet");
        tokio::time::advance(Duration::from_millis(200)).await;
        m.check_expiry().await;
        let Ok(GroupEvent::Lost { reason }) = rx.try_recv() else {
            panic!("no loss reported")
        };
        assert!(reason.contains("6000 ms"), "{reason}");
        assert!(m.member_id.is_empty() && m.held.is_none() && !m.joined);
        m.check_expiry().await;
        assert!(rx.try_recv().is_err(), "reported once");
    }
}
