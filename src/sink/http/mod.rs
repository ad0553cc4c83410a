//! HTTP behind the broker seam, as Debezium Server 3.6.1's `http` sink
//! sends (docs/debezium-server-sinks.md §7, §8.6): one `POST` per record to
//! one fixed URL (the topic appears nowhere), the record's value as the
//! body, `content-type` (`application/json` unless set), each record header
//! as `<headers_prefix><NAME IN UPPER CASE>: <base64 of its value>`
//! (`X-DEBEZIUM-ID: ...`), no key, and a record with a null value not sent
//! at all. A 2xx answer is the acknowledgement the tracker hears. With
//! `batch = true`, as Debezium Server's `batch.enabled`, up to
//! `batch_max_size` records go in one request whose body is `[` + their
//! values joined by `,` + `]`, with the first record's headers.
//! Authentication: HTTP basic, a static bearer token, and Debezium
//! Server's three (`jwt`, `oauth2` client credentials, `standard-webhooks`
//! signatures) with the headers it sends, `Bearer:` quirk included.
//!
//! Answers: 2xx acknowledges; 5xx, 408, 429, a timeout (`timeout_ms`) or a
//! connection error is sent again in place, up to `retries` attempts in all
//! with `retry_interval_ms` between them (Debezium Server's `retries` and
//! `retry.interval.ms`), then handed back to the worker as a retry (it
//! pauses, 100 ms doubling to 5 s, and sends again from that record, for
//! as long as it takes: where Debezium Server exits after its attempts,
//! walrelay holds the slot and keeps trying). Any other 4xx refuses the
//! record (`rejected_<status>`, so `[errors]` applies: stop, or its
//! dead-letter record), except 401 and 407, which are about walrelay's
//! credentials, not the record, and stop the sink (after a new token was
//! tried, for `jwt` and `oauth2`). A 3xx stops the sink too: no redirect
//! is followed (set `url` to the final location).
//!
//! The dead-letter destination: Debezium Server's URL is fixed and no topic
//! reaches the receiver, so a dead-letter record goes to the same URL,
//! told apart by `X-Walrelay-Dead-Letter: <errors.dead_letter_topic>`, its
//! `Idempotency-Key: dead-letter:<event id>` and (unless
//! `errors.dead_letter_context_headers = false`) the context headers, which
//! travel like every record header (`X-DEBEZIUM-WALRELAY.ERROR.KIND`, ...).
//!
//! What walrelay adds on purpose: `Idempotency-Key: <event id>` on every
//! record that has one (`idempotency_key = false` turns it off), so that a
//! receiver can drop an event delivered again after a crash or a retry; a
//! `standard-webhooks` `webhook-id` of `msg_<event id>` (Debezium Server's
//! is a random UUID per record, new after every restart) for the same
//! reason; `User-Agent: walrelay/<version>`; HTTP/1.1 only (no `h2c`
//! upgrade offer); header names in lower case (HTTP names are
//! case-insensitive).
//!
//! Order and concurrency: HTTP/1.1 keep-alive connections, at most
//! `max_in_flight` requests at once (default 4; 1 in the Debezium Server
//! form, whose sink sends one request at a time), each on a connection of
//! its own. Requests leave in the pipeline's order, and a request is only
//! sent when no earlier one for the same destination and record key is
//! still in flight: two requests for one aggregate are never in flight
//! together, so an earlier one can never fail and be sent again after a
//! later one succeeded. Across keys, requests overlap (with
//! `max_in_flight = 1` the receiver sees the commit order across keys too).
//! Answers are settled strictly in order: the worker hears a record's
//! outcome only after every earlier record's. A retry or a refusal stops
//! new requests of the batch (so a dead-letter record, or the retry, comes
//! before any later record of its key and anything not sent yet); those
//! already in flight (other keys) finish, and a retry resends from the
//! first record not acknowledged (a later one that was acknowledged
//! meanwhile may arrive twice: at least once, with its `Idempotency-Key`).
//!
//! TLS: OpenSSL through tokio-openssl, both already linked (PostgreSQL's
//! TLS uses them), under hyper's own HTTP/1.1 connection API: no new
//! crate, and walrelay keeps each connection in hand (one request in
//! flight on it, dropped after a timeout or a failure).

//!
//! The files, one concern each: `config` the settings and their
//! validation, `client` the connections (TCP, TLS, HTTP/1.1), `auth` the
//! credentials and token flows, `request` a batch made into requests,
//! `deliver` one request's attempts, `answer` what a status comes to; this
//! file the publisher that runs them, in order per key.

mod answer;
mod auth;
mod client;
mod config;
mod deliver;
mod request;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use tracing::info;

use self::answer::{broken, refused, rejected_kind, Verdict};
use self::auth::{webhook_key, Auth, TokenError};
use self::client::{user_agent, Conn, Endpoint};
pub(crate) use self::config::HttpConfig;
use self::config::{
    DEFAULT_BATCH_MAX_SIZE, DEFAULT_CONTENT_TYPE, DEFAULT_MAX_IN_FLIGHT, DEFAULT_RETRIES,
    DEFAULT_RETRY_INTERVAL_MS,
};
use self::deliver::{deliver, Ctx, Done};
use self::request::OrderKey;
use super::broker::Guarantees;
use super::queued::{Outcome, Outgoing, Publisher};

/// The largest record a dead-letter record may carry whole: HTTP sets no
/// limit of its own; a receiver's is answered with 413.
pub(crate) const MAX_BYTES: usize = 16 << 20;

/// A connected HTTP publisher: kept-alive connections to the URL.
pub(crate) struct Http {
    ctx: Arc<Ctx>,
    idle: Vec<Conn>,
    auth: Auth,
    generation: u64,
    content_type: HeaderValue,
    prefix: String,
    base64: bool,
    extra: HeaderMap,
    idempotency_key: bool,
    dead_letter: Option<(String, HeaderValue)>,
    batch: Option<usize>,
    max_in_flight: usize,
}

impl Publisher for Http {
    const NAME: &'static str = "http";
    /// One request in flight per key keeps the order per key; HTTP has no
    /// transactions, and deduplication (by `Idempotency-Key`) is the
    /// receiver's.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "walrelay::sink::http::Rejected";
    type Config = HttpConfig;

    async fn connect(config: &HttpConfig) -> Result<Http, String> {
        let endpoint = Endpoint::new(&config.url, || config.tls(false))?;
        let timeout = config.timeout();
        let auth = Auth::of(config)?;
        let webhook = match &config.webhook_secret {
            Some(s) => {
                Some(webhook_key(s.expose()).map_err(|e| format!("sink.http.webhook_secret {e}"))?)
            }
            None => None,
        };
        let mut extra = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            let mut value = HeaderValue::from_str(value.expose()).map_err(|e| e.to_string())?;
            value.set_sensitive(true);
            extra.insert(name, value);
        }
        extra.insert(header::HOST, endpoint.target.authority.clone());
        extra.insert(header::USER_AGENT, user_agent());
        // The first connection now: the receiver answers, or /readyz says
        // it does not.
        let first = tokio::time::timeout(timeout, endpoint.open())
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "cannot connect to {} within {} ms",
                    endpoint.target.origin,
                    timeout.as_millis()
                ))
            })?;
        let content_type = config
            .content_type
            .as_deref()
            .unwrap_or(DEFAULT_CONTENT_TYPE);
        Ok(Http {
            ctx: Arc::new(Ctx {
                endpoint,
                timeout,
                attempts: config.retries.unwrap_or(DEFAULT_RETRIES).max(1),
                retry_interval: Duration::from_millis(
                    config
                        .retry_interval_ms
                        .unwrap_or(DEFAULT_RETRY_INTERVAL_MS),
                ),
                webhook,
            }),
            idle: vec![first],
            auth,
            generation: 0,
            content_type: HeaderValue::from_str(content_type).map_err(|e| e.to_string())?,
            prefix: config.prefix().to_owned(),
            base64: config.headers_encode_base64.unwrap_or(true),
            extra,
            idempotency_key: config.idempotency_key.unwrap_or(true),
            dead_letter: config
                .dead_letter_topic
                .as_ref()
                .and_then(|t| HeaderValue::from_str(t).ok().map(|v| (t.clone(), v))),
            batch: config
                .batch
                .then(|| config.batch_max_size.unwrap_or(DEFAULT_BATCH_MAX_SIZE)),
            max_in_flight: config.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; batch.len()];
        let units = self.plan(batch, &mut outcomes);
        let mut running = FuturesUnordered::new();
        let mut busy: HashSet<OrderKey> = HashSet::new();
        let mut halted = false;
        for mut unit in units {
            while running.len() >= self.max_in_flight || unit.keys.iter().any(|k| busy.contains(k))
            {
                let Some(done) = running.next().await else {
                    break;
                };
                halted |= self.finish(done, &mut outcomes, &mut busy);
            }
            if halted {
                break;
            }
            match self
                .auth
                .authorization(self.ctx.timeout, &mut self.generation)
                .await
            {
                Ok(None) => {}
                Ok(Some((value, generation))) => {
                    unit.headers.insert(header::AUTHORIZATION, value);
                    unit.generation = generation;
                }
                Err(e) => {
                    let outcome = match e {
                        TokenError::Passing(why) => Outcome::Retry(why),
                        TokenError::Refused(why) => broken("auth_refused", why),
                    };
                    for &i in &unit.records {
                        outcomes[i] = Some(outcome.clone());
                    }
                    break;
                }
            }
            busy.extend(unit.keys.iter().cloned());
            let conn = self.idle.pop();
            running.push(deliver(Arc::clone(&self.ctx), unit, conn));
        }
        while let Some(done) = running.next().await {
            self.finish(done, &mut outcomes, &mut busy);
        }
        let mut settled = Vec::with_capacity(batch.len());
        for outcome in outcomes {
            let Some(outcome) = outcome else { break };
            let retry = matches!(outcome, Outcome::Retry(_));
            settled.push(outcome);
            if retry {
                break;
            }
        }
        settled
    }
}

impl Http {
    /// Settles a request that ended; whether later requests of the batch
    /// must wait (a retry, a refusal).
    fn finish(
        &mut self,
        done: Done,
        outcomes: &mut [Option<Outcome>],
        busy: &mut HashSet<OrderKey>,
    ) -> bool {
        let Done {
            unit,
            verdict,
            conn,
        } = done;
        for k in &unit.keys {
            busy.remove(k);
        }
        if let Some(conn) = conn {
            if !conn.is_closed() {
                self.idle.push(conn);
            }
        }
        let token = self.auth.token();
        let outcome = match verdict {
            Verdict::Acked => {
                if let Some(Some(t)) = token {
                    if t.generation == unit.generation {
                        t.proven = true;
                    }
                }
                Outcome::Acked
            }
            Verdict::Passing(why) => Outcome::Retry(why),
            Verdict::Unauthorized(code, text) => match token {
                // A token that worked before has expired early (or was
                // revoked): a new one, and the request again.
                Some(slot) if slot.as_ref().is_some_and(|t| t.proven) => {
                    info!(
                        broker = "http",
                        "the receiver refused the token; getting a new one"
                    );
                    *slot = None;
                    Outcome::Retry(text)
                }
                _ => broken(
                    format!("unauthorized_{code}"),
                    format!("{text}: the receiver refused walrelay's credentials"),
                ),
            },
            Verdict::Rejected(code, text) => refused(
                rejected_kind(code),
                code == 413,
                format!("rejected_{code}"),
                text,
            ),
            Verdict::Broken(code, text) => broken(code, text),
        };
        let halt = !matches!(outcome, Outcome::Acked);
        for &i in &unit.records {
            outcomes[i] = Some(outcome.clone());
        }
        halt
    }
}
