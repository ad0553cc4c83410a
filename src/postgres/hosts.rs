//! Choosing a server from `postgres.host`'s list with libpq's rules: hosts
//! are tried in order, each within `connect_timeout_ms`; one that refuses,
//! times out or fails the `target_session_attrs` test is closed and the
//! next is tried; `prefer-standby` makes a second pass accepting any server
//! when no host is a standby; after the last host the error names every
//! host tried and why.
//!
//! Owns the order, the passes, the test of a connected server (from the
//! `in_hot_standby` and `default_transaction_read_only` ParameterStatus
//! that PostgreSQL 14 and later report at startup, else from
//! `SHOW transaction_read_only` or `pg_is_in_recovery()`, as libpq) and the
//! error that lists the hosts. It never opens a socket itself: each
//! connection (replication, catalog) hands it a function that connects to
//! one host and tests it, so the rules are the same for both and are tested
//! without a server.

use std::fmt;
use std::future::Future;

use tracing::{debug, info};

use crate::chain::DisplayChain;
use crate::postgres::config::{Endpoint, TargetSessionAttrs};
use crate::retry::{Class, Retry};

/// What the test of a target needs to know about a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing (`any`).
    Nothing,
    /// Whether the session is read-only by default (`read-write`, `read-only`).
    ReadOnly,
    /// Whether the server is in hot standby (`primary`, `standby`).
    HotStandby,
}

/// What a target of one pass needs; `prefer-standby` is tested as `standby`
/// in its first pass (and as `any` in its second).
pub(crate) fn need(target: TargetSessionAttrs) -> Need {
    match target {
        TargetSessionAttrs::Any => Need::Nothing,
        TargetSessionAttrs::ReadWrite | TargetSessionAttrs::ReadOnly => Need::ReadOnly,
        TargetSessionAttrs::Primary
        | TargetSessionAttrs::Standby
        | TargetSessionAttrs::PreferStandby => Need::HotStandby,
    }
}

/// The GUC_REPORT parameters PostgreSQL 14 and later send at startup
/// (absent from older servers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Reported {
    pub(crate) in_hot_standby: Option<bool>,
    /// `default_transaction_read_only`.
    pub(crate) default_transaction_read_only: Option<bool>,
}

impl Reported {
    /// Records one ParameterStatus; other parameters are ignored.
    pub(crate) fn record(&mut self, name: &str, value: &str) {
        let on = value == "on";
        match name {
            "in_hot_standby" => self.in_hot_standby = Some(on),
            "default_transaction_read_only" => self.default_transaction_read_only = Some(on),
            _ => {}
        }
    }

    /// What `need` asks, when the startup parameters answer it: libpq uses
    /// them only when the server reported both (read-only-ness) or
    /// `in_hot_standby` (hot standby); otherwise it asks with a query.
    pub(crate) fn answer(&self, need: Need) -> Option<bool> {
        match need {
            Need::Nothing => Some(false),
            Need::ReadOnly => match (self.default_transaction_read_only, self.in_hot_standby) {
                (Some(read_only), Some(standby)) => Some(read_only || standby),
                _ => None,
            },
            Need::HotStandby => self.in_hot_standby,
        }
    }
}

/// The query libpq sends when the startup parameters do not answer `need`;
/// its one value is `on`/`off` or `t`/`f`.
pub(crate) fn query(need: Need) -> Option<&'static str> {
    match need {
        Need::Nothing => None,
        Need::ReadOnly => Some("SHOW transaction_read_only"),
        Need::HotStandby => Some("SELECT pg_catalog.pg_is_in_recovery()"),
    }
}

/// Reads the one value of [`query`]'s answer.
pub(crate) fn parse_answer(value: Option<&str>) -> Option<bool> {
    match value? {
        "on" | "t" | "true" => Some(true),
        "off" | "f" | "false" => Some(false),
        _ => None,
    }
}

/// Whether a server whose answer to `need(target)` is `yes` fits `target`;
/// the error is libpq's reason for skipping it.
pub(crate) fn verdict(target: TargetSessionAttrs, yes: bool) -> Result<(), &'static str> {
    match target {
        TargetSessionAttrs::Any => Ok(()),
        TargetSessionAttrs::ReadWrite if yes => Err("session is read-only"),
        TargetSessionAttrs::ReadOnly if !yes => Err("session is not read-only"),
        TargetSessionAttrs::Primary if yes => Err("server is in hot standby mode"),
        TargetSessionAttrs::Standby | TargetSessionAttrs::PreferStandby if !yes => {
            Err("server is not in hot standby mode")
        }
        _ => Ok(()),
    }
}

/// Why one host was not used.
#[derive(Debug)]
pub(crate) enum Refusal<E> {
    /// It could not be connected to (or timed out, or refused the login),
    /// and whether trying it again can help.
    Failed(Retry<E>),
    /// It connected but failed the `target_session_attrs` test.
    Mismatch(&'static str),
}

/// One host tried and not used.
#[derive(Debug)]
pub(crate) struct Attempt<E> {
    /// The host.
    pub(crate) endpoint: Endpoint,
    /// Why not.
    pub(crate) refusal: Refusal<E>,
}

/// No host of the list was usable; names each host tried and why.
#[derive(Debug)]
pub struct HostsError<E> {
    /// The target in effect.
    pub(crate) target: TargetSessionAttrs,
    /// Every host tried, in order (a host twice with `prefer-standby`).
    pub(crate) attempts: Vec<Attempt<E>>,
    /// Whether trying the list again can help, decided by [`choose`] from
    /// the attempts: a host that was down or not yet promoted may be back;
    /// only when every host failed for good (a refused login, a
    /// certificate) is it definite.
    pub(crate) retry: Class,
}

impl<E: std::error::Error + 'static> fmt::Display for HostsError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no host of postgres.host is usable with target_session_attrs = {}: ",
            self.target
        )?;
        f.write_str(&describe(&self.attempts))
    }
}

impl<E: std::error::Error + 'static> std::error::Error for HostsError<E> {}

/// `host:port: reason; ...`, for errors and logs.
pub(crate) fn describe<E: std::error::Error + 'static>(attempts: &[Attempt<E>]) -> String {
    attempts
        .iter()
        .map(|a| match &a.refusal {
            Refusal::Failed(e) => format!("{}: {}", a.endpoint, DisplayChain(e)),
            Refusal::Mismatch(why) => format!("{}: {why}", a.endpoint),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl<E> HostsError<E> {
    /// The error to return: a single host that failed to connect gives its
    /// own error, as before host lists existed; anything else is `wrap`ped.
    pub(crate) fn collapse(mut self, wrap: impl FnOnce(Self) -> E) -> E {
        if self.attempts.len() == 1 && matches!(self.attempts[0].refusal, Refusal::Failed(_)) {
            if let Some(Attempt {
                refusal: Refusal::Failed(e),
                ..
            }) = self.attempts.pop()
            {
                return e.into_inner();
            }
        }
        wrap(self)
    }
}

/// [`HostsError::retry`] for these attempts.
fn retry_of<E>(attempts: &[Attempt<E>]) -> Class {
    let transient = attempts.iter().any(|a| {
        matches!(
            a.refusal,
            Refusal::Failed(Retry::Transient(_)) | Refusal::Mismatch(_)
        )
    });
    if transient {
        Class::Transient
    } else {
        Class::Definite
    }
}

/// The passes over the host list libpq makes for `target`: one, testing
/// `target`; for `prefer-standby` a first testing `standby` and a second
/// accepting any server.
pub(crate) fn passes(target: TargetSessionAttrs) -> &'static [TargetSessionAttrs] {
    match target {
        TargetSessionAttrs::PreferStandby => {
            &[TargetSessionAttrs::Standby, TargetSessionAttrs::Any]
        }
        TargetSessionAttrs::Any => &[TargetSessionAttrs::Any],
        TargetSessionAttrs::ReadWrite => &[TargetSessionAttrs::ReadWrite],
        TargetSessionAttrs::ReadOnly => &[TargetSessionAttrs::ReadOnly],
        TargetSessionAttrs::Primary => &[TargetSessionAttrs::Primary],
        TargetSessionAttrs::Standby => &[TargetSessionAttrs::Standby],
    }
}

/// Tries `hosts` in order with libpq's rules and returns the first
/// connection `connect` accepts, with its host. `connect(endpoint, test)`
/// connects to one host within its own timeout and applies `test` (never
/// `prefer-standby`: the passes resolve it), closing the connection on a
/// mismatch. `what` names the connection in the logs.
pub(crate) async fn choose<C, E, F, Fut>(
    what: &'static str,
    hosts: &[Endpoint],
    target: TargetSessionAttrs,
    mut connect: F,
) -> Result<(C, Endpoint), HostsError<E>>
where
    E: std::error::Error + 'static,
    F: FnMut(Endpoint, TargetSessionAttrs) -> Fut,
    Fut: Future<Output = Result<C, Refusal<E>>>,
{
    let mut attempts = Vec::new();
    for &test in passes(target) {
        for endpoint in hosts {
            match connect(endpoint.clone(), test).await {
                Ok(conn) => {
                    if attempts.is_empty() && hosts.len() == 1 {
                        debug!(connection = what, host = %endpoint, "connected to postgresql");
                    } else if attempts.is_empty() {
                        info!(
                            connection = what,
                            host = %endpoint,
                            target_session_attrs = %target,
                            "connected to postgresql, the first host of postgres.host"
                        );
                    } else {
                        info!(
                            connection = what,
                            host = %endpoint,
                            target_session_attrs = %target,
                            skipped = %describe(&attempts),
                            "connected to postgresql after skipping hosts"
                        );
                    }
                    return Ok((conn, endpoint.clone()));
                }
                Err(refusal) => {
                    match &refusal {
                        Refusal::Failed(e) => {
                            debug!(connection = what, host = %endpoint, error = %DisplayChain(e), "host skipped");
                        }
                        Refusal::Mismatch(why) => {
                            debug!(connection = what, host = %endpoint, test = %test, reason = why, "host skipped");
                        }
                    }
                    attempts.push(Attempt {
                        endpoint: endpoint.clone(),
                        refusal,
                    });
                }
            }
        }
    }
    let retry = retry_of(&attempts);
    Err(HostsError {
        target,
        attempts,
        retry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Down(&'static str);

    /// What a fake host is.
    #[derive(Clone, Copy)]
    enum Host {
        Unreachable,
        /// Refuses the login: trying again cannot help.
        Refusing,
        Primary,
        Standby,
        /// A primary with `default_transaction_read_only = on`.
        ReadOnlyPrimary,
    }

    /// Runs [`choose`] over fake hosts; returns the chosen host (or the
    /// error's text) and the hosts connected to, in order.
    fn run(
        hosts: &[(&str, Host)],
        target: TargetSessionAttrs,
    ) -> (Result<String, String>, Vec<String>) {
        let (result, tried) = try_hosts(hosts, target);
        (
            result.map(|e| e.to_string()).map_err(|e| e.to_string()),
            tried,
        )
    }

    /// The error of [`choose`] over fake hosts none of which is usable.
    fn fail(hosts: &[(&str, Host)], target: TargetSessionAttrs) -> HostsError<Down> {
        try_hosts(hosts, target).0.expect_err("no usable host")
    }

    /// Runs [`choose`] over fake hosts; returns the chosen host (or the
    /// error) and the hosts connected to, in order.
    fn try_hosts(
        hosts: &[(&str, Host)],
        target: TargetSessionAttrs,
    ) -> (Result<Endpoint, HostsError<Down>>, Vec<String>) {
        let kinds: HashMap<String, Host> = hosts
            .iter()
            .map(|(h, k)| (format!("{h}:5432"), *k))
            .collect();
        let endpoints: Vec<Endpoint> = hosts.iter().map(|(h, _)| Endpoint::new(*h, 5432)).collect();
        let mut tried = Vec::new();
        let result = futures_util::FutureExt::now_or_never(choose(
            "test",
            &endpoints,
            target,
            |endpoint: Endpoint, test| {
                tried.push(endpoint.to_string());
                let kind = kinds[&endpoint.to_string()];
                async move {
                    let reported = match kind {
                        Host::Unreachable => {
                            return Err(Refusal::Failed(Retry::Transient(Down(
                                "connection refused",
                            ))))
                        }
                        Host::Refusing => {
                            return Err(Refusal::Failed(Retry::Definite(Down(
                                "password authentication failed",
                            ))))
                        }
                        Host::Primary => ("off", "off"),
                        Host::Standby => ("on", "on"),
                        Host::ReadOnlyPrimary => ("off", "on"),
                    };
                    let mut r = Reported::default();
                    r.record("in_hot_standby", reported.0);
                    r.record("default_transaction_read_only", reported.1);
                    let yes = r.answer(need(test)).expect("both reported");
                    verdict(test, yes).map_err(Refusal::Mismatch)?;
                    Ok(())
                }
            },
        ))
        .expect("no awaits pending");
        (result.map(|((), e)| e), tried)
    }

    use Host::*;
    use TargetSessionAttrs as T;

    #[test]
    fn any_takes_the_first_that_connects() {
        let (got, tried) = run(
            &[("a", Unreachable), ("b", Standby), ("c", Primary)],
            T::Any,
        );
        assert_eq!(got.unwrap(), "b:5432");
        assert_eq!(tried, ["a:5432", "b:5432"]);
    }

    #[test]
    fn read_write_skips_standbys_and_read_only_primaries() {
        let hosts = [("a", Standby), ("b", ReadOnlyPrimary), ("c", Primary)];
        assert_eq!(run(&hosts, T::ReadWrite).0.unwrap(), "c:5432");
        // primary tests hot standby only: a read-only primary is one.
        assert_eq!(run(&hosts, T::Primary).0.unwrap(), "b:5432");
        assert_eq!(run(&hosts, T::ReadOnly).0.unwrap(), "a:5432");
        assert_eq!(run(&hosts, T::Standby).0.unwrap(), "a:5432");
    }

    #[test]
    fn prefer_standby_makes_a_second_pass_accepting_any() {
        let (got, tried) = run(&[("a", Unreachable), ("b", Primary)], T::PreferStandby);
        assert_eq!(got.unwrap(), "b:5432");
        // libpq starts again from the first host in the second pass.
        assert_eq!(tried, ["a:5432", "b:5432", "a:5432", "b:5432"]);
        let (got, _) = run(&[("a", Primary), ("b", Standby)], T::PreferStandby);
        assert_eq!(got.unwrap(), "b:5432");
    }

    #[test]
    fn the_error_names_every_host_and_why() {
        let (got, tried) = run(&[("a", Unreachable), ("b", Primary)], T::Standby);
        let err = got.unwrap_err();
        assert_eq!(
            err,
            "no host of postgres.host is usable with target_session_attrs = standby: \
             a:5432: connection refused; b:5432: server is not in hot standby mode"
        );
        assert_eq!(tried, ["a:5432", "b:5432"]);
    }

    #[test]
    fn libpq_uses_startup_parameters_only_when_complete() {
        let mut r = Reported::default();
        r.record("in_hot_standby", "off");
        // default_transaction_read_only missing: libpq asks with SHOW.
        assert_eq!(r.answer(Need::ReadOnly), None);
        assert_eq!(r.answer(Need::HotStandby), Some(false));
        r.record("default_transaction_read_only", "on");
        assert_eq!(r.answer(Need::ReadOnly), Some(true));
        assert_eq!(Reported::default().answer(Need::HotStandby), None);
        assert_eq!(query(Need::ReadOnly), Some("SHOW transaction_read_only"));
        assert_eq!(parse_answer(Some("t")), Some(true));
        assert_eq!(parse_answer(Some("off")), Some(false));
        assert_eq!(parse_answer(None), None);
    }

    #[test]
    fn transient_unless_every_host_failed_for_good() {
        // No primary yet (a failover in progress): try again.
        assert_eq!(
            fail(&[("a", Standby)], T::ReadWrite).retry,
            Class::Transient
        );
        // One host refused for good, another may come back.
        let some_down = fail(&[("a", Refusing), ("b", Unreachable)], T::Any);
        assert_eq!(some_down.retry, Class::Transient);
        let refused = fail(&[("a", Refusing)], T::Any);
        assert_eq!(refused.retry, Class::Definite);
        // One host that failed gives its own error back.
        assert_eq!(
            refused.collapse(|_| Down("wrapped")).to_string(),
            "password authentication failed"
        );
    }
}
