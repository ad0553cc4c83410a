//! Sending one request until it is acknowledged, refused, or its attempts
//! are spent: the Standard Webhooks signature per attempt, the timeout,
//! the pause between attempts. Runs on the publisher's in-flight futures.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;
use openssl::pkey::{PKey, Private};
use tracing::warn;

use super::answer::{classify, Verdict};
use super::auth::webhook_signature;
use super::client::{Conn, Endpoint};
use super::request::Unit;

/// What every request needs, shared with the tasks sending them.
pub(super) struct Ctx {
    pub(super) endpoint: Endpoint,
    pub(super) timeout: Duration,
    pub(super) attempts: u32,
    pub(super) retry_interval: Duration,
    pub(super) webhook: Option<PKey<Private>>,
}

/// A request that ended: its unit, its verdict, its connection if reusable.
pub(super) struct Done {
    pub(super) unit: Unit,
    pub(super) verdict: Verdict,
    pub(super) conn: Option<Conn>,
}

/// Sends `unit` until it is acknowledged, refused, or its attempts are
/// spent, pausing `retry_interval` between attempts.
pub(super) async fn deliver(ctx: Arc<Ctx>, unit: Unit, mut conn: Option<Conn>) -> Done {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut headers = unit.headers.clone();
        if let (Some(key), Some(id)) = (&ctx.webhook, &unit.webhook_id) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            match webhook_signature(key, id, now, &unit.body) {
                Ok(signature) => {
                    for (name, value) in [
                        ("webhook-id", id.clone()),
                        ("webhook-signature", signature),
                        ("webhook-timestamp", now.to_string()),
                    ] {
                        if let Ok(v) = HeaderValue::from_str(&value) {
                            headers.insert(name, v);
                        }
                    }
                }
                Err(e) => {
                    return Done {
                        unit,
                        verdict: Verdict::Broken("signature".into(), e),
                        conn,
                    }
                }
            }
        }
        let verdict = match tokio::time::timeout(
            ctx.timeout,
            ctx.endpoint.exchange(&mut conn, headers, unit.body.clone()),
        )
        .await
        {
            Err(_) => Verdict::Passing(format!(
                "no answer from {} within {} ms",
                ctx.endpoint.target.origin,
                ctx.timeout.as_millis()
            )),
            Ok(Err(e)) => Verdict::Passing(e),
            Ok(Ok((status, body))) => classify(status, &body),
        };
        match verdict {
            Verdict::Passing(why) if attempt < ctx.attempts => {
                warn!(broker = "http", attempt, error = %why, "the receiver did not take the request; sending it again");
                tokio::time::sleep(ctx.retry_interval).await;
            }
            verdict => {
                return Done {
                    unit,
                    verdict,
                    conn,
                }
            }
        }
    }
}
