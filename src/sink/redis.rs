//! Redis Streams behind the broker seam, as Debezium Server's `redis`
//! sink writes: one `XADD <stream> * ...` per record, the stream named by
//! the router (the topic name as it is); in the `compact` format (the
//! default) one field whose name is the record key and whose value is the
//! record value, in the `extended` format the fields `key`, `value` and
//! then each header with its name in upper case. A null key or value is
//! written as `null_key` / `null_value` (both `default`, as Debezium
//! Server's). Records are pipelined; each `XADD`'s reply (the entry id)
//! is the acknowledgement.
//!
//! Memory: before a batch, as Debezium Server does, walrelay reads
//! `used_memory` and the limit (`maxmemory`, or `memory_limit_mb` when set)
//! and waits while the use is above `memory_threshold_percentage`; an
//! `OOM` answer is retried from the record it refused (Redis refuses, it
//! never evicts a stream entry walrelay wrote unless the stream's own
//! policy does).
//!
//! Order: one connection, one pipeline at a time, replies in order; a
//! retry starts at the first record not acknowledged, so a stream keeps
//! the events' order unless Redis stored a later record of the batch
//! while refusing an earlier one (an OOM in between: the earlier one then
//! follows it).

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use serde::Deserialize;

use super::broker::{FailureClass, Guarantees};
use super::queued::{debezium_header_order, Outcome, Outgoing, Publisher};
use crate::secret::Secret;
use crate::setting::SettingError;

/// Redis's limit on one string (a field value): 512 MB; a dead-letter
/// record is bounded well below it.
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// Debezium Server's `null.key` and `null.value`.
const NULL_DEFAULT: &str = "default";

/// `[sink.redis]`: Redis Streams (`debezium.sink.redis.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RedisConfig {
    /// `host:port` of the server.
    pub(crate) address: String,
    /// ACL user (Redis 6+), with `password`.
    #[serde(default)]
    pub(crate) user: Option<String>,
    /// Password (`requirepass`, or the user's).
    #[serde(default)]
    pub(crate) password: Option<Secret>,
    /// Database index (`db.index`, default 0).
    #[serde(default)]
    pub(crate) db: Option<i64>,
    /// TLS (`ssl.enabled`).
    #[serde(default)]
    pub(crate) tls: bool,
    /// Written for a null key (`null.key`, default `default`).
    #[serde(default)]
    pub(crate) null_key: Option<String>,
    /// Written for a null value (`null.value`, default `default`).
    #[serde(default)]
    pub(crate) null_value: Option<String>,
    /// `compact` (default) or `extended` (`message.format`).
    #[serde(default)]
    pub(crate) message_format: Option<String>,
    /// Records per pipeline (`batch.size`, default 500).
    #[serde(default)]
    pub(crate) batch_size: Option<usize>,
    /// Wait while Redis uses more than this share of its memory limit
    /// (`memory.threshold.percentage`, default 85; 0 turns it off).
    #[serde(default)]
    pub(crate) memory_threshold_percentage: Option<u32>,
    /// The memory limit, MB, when Redis has no `maxmemory`
    /// (`memory.limit.mb`, default 0: none).
    #[serde(default)]
    pub(crate) memory_limit_mb: Option<u64>,
    /// Connection timeout, ms (`connection.timeout.ms`, default 2000).
    #[serde(default)]
    pub(crate) connection_timeout_ms: Option<u64>,
    /// Reply timeout, ms (`socket.timeout.ms`, default 2000).
    #[serde(default)]
    pub(crate) socket_timeout_ms: Option<u64>,
    /// Leave heartbeat records out (`skip.heartbeat.messages`, default
    /// true, as Debezium Server's).
    #[serde(default)]
    pub(crate) skip_heartbeats: Option<bool>,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("address", &self.address)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("db", &self.db)
            .field("tls", &self.tls)
            .field("null_key", &self.null_key)
            .field("null_value", &self.null_value)
            .field("message_format", &self.message_format)
            .field("batch_size", &self.batch_size)
            .field(
                "memory_threshold_percentage",
                &self.memory_threshold_percentage,
            )
            .field("memory_limit_mb", &self.memory_limit_mb)
            .finish_non_exhaustive()
    }
}

impl RedisConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let (host, port) = self.address.rsplit_once(':').unwrap_or(("", ""));
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(SettingError::invalid(
                "sink.redis.address",
                format!("{:?}: must be host:port", self.address),
            ));
        }
        match self.message_format.as_deref() {
            None | Some("compact" | "extended") => {}
            Some(other) => {
                return Err(SettingError::invalid(
                    "sink.redis.message_format",
                    format!("{other:?}: must be \"compact\" or \"extended\""),
                ))
            }
        }
        if self.batch_size == Some(0) {
            return Err(SettingError::invalid(
                "sink.redis.batch_size",
                "must be above 0",
            ));
        }
        if self.memory_threshold_percentage.is_some_and(|p| p > 100) {
            return Err(SettingError::invalid(
                "sink.redis.memory_threshold_percentage",
                "must be 0 to 100",
            ));
        }
        if self.user.is_some() && self.password.is_none() {
            return Err(SettingError::invalid(
                "sink.redis.password",
                "an ACL user needs its password",
            ));
        }
        Ok(())
    }

    fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{}/{}", self.address, self.db.unwrap_or(0))
    }
}

/// What `walrelay check` reads of a Redis server (never writing): its
/// version, which must have streams (5.0+), and the type of each key the
/// router will `XADD` to (`none` or `stream` will do).
pub(crate) async fn probe(
    config: &RedisConfig,
    keys: &[String],
) -> Result<(String, Vec<(String, String)>), String> {
    let mut publisher = <Redis as Publisher>::connect(config).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut publisher.conn)
        .await
        .map_err(|e| e.to_string())?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_owned();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 5 {
        return Err(format!(
            "redis {version} has no streams (XADD needs 5.0 or later)"
        ));
    }
    let mut types = Vec::with_capacity(keys.len());
    for key in keys {
        let t: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut publisher.conn)
            .await
            .map_err(|e| e.to_string())?;
        types.push((key.clone(), t));
    }
    Ok((format!("redis {version} at {}", config.address), types))
}

/// A connected Redis publisher.
pub(crate) struct Redis {
    conn: MultiplexedConnection,
    extended: bool,
    null_key: Bytes,
    null_value: Bytes,
    batch: usize,
    threshold: u32,
    limit_mb: u64,
}

impl Publisher for Redis {
    const NAME: &'static str = "redis";
    /// One connection keeps the order; Redis has no transactions spanning
    /// walrelay's progress and no deduplication of an entry.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "redis::RedisError";
    type Config = RedisConfig;

    fn skips_heartbeats(config: &RedisConfig) -> bool {
        config.skip_heartbeats.unwrap_or(true)
    }

    async fn connect(config: &RedisConfig) -> Result<Redis, String> {
        let mut info: redis::ConnectionInfo =
            redis::IntoConnectionInfo::into_connection_info(config.url().as_str())
                .map_err(|e| format!("sink.redis.address: {e}"))?;
        let mut redis_info = info.redis_settings().clone();
        if let Some(user) = &config.user {
            redis_info = redis_info.set_username(user.clone());
        }
        if let Some(password) = &config.password {
            redis_info = redis_info.set_password(password.expose());
        }
        info = info.set_redis_settings(redis_info);
        let client = redis::Client::open(info).map_err(|e| e.to_string())?;
        let conn = client
            .get_multiplexed_async_connection_with_config(
                &AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(Duration::from_millis(
                        config.connection_timeout_ms.unwrap_or(2000),
                    )))
                    .set_response_timeout(Some(Duration::from_millis(
                        config.socket_timeout_ms.unwrap_or(2000).max(2000) * 5,
                    ))),
            )
            .await
            .map_err(|e| format!("cannot connect to redis at {}: {e}", config.address))?;
        Ok(Redis {
            conn,
            extended: config.message_format.as_deref() == Some("extended"),
            null_key: Bytes::from(
                config
                    .null_key
                    .clone()
                    .unwrap_or_else(|| NULL_DEFAULT.to_owned()),
            ),
            null_value: Bytes::from(
                config
                    .null_value
                    .clone()
                    .unwrap_or_else(|| NULL_DEFAULT.to_owned()),
            ),
            batch: config.batch_size.unwrap_or(500),
            threshold: config.memory_threshold_percentage.unwrap_or(85),
            limit_mb: config.memory_limit_mb.unwrap_or(0),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(self.batch) {
            if let Some(why) = self.over_memory().await {
                outcomes.push(Outcome::Retry(why));
                return outcomes;
            }
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for record in chunk {
                self.xadd(&mut pipe, record);
            }
            match pipe.query_async::<Vec<Value>>(&mut self.conn).await {
                Ok(replies) => {
                    for reply in replies {
                        let outcome = reply_outcome(reply);
                        let retry = matches!(outcome, Outcome::Retry(_));
                        outcomes.push(outcome);
                        if retry {
                            return outcomes;
                        }
                    }
                }
                Err(e) => {
                    outcomes.push(Outcome::Retry(e.to_string()));
                    return outcomes;
                }
            }
        }
        outcomes
    }
}

impl Redis {
    fn xadd(&self, pipe: &mut redis::Pipeline, record: &Outgoing) {
        let key = record.key.as_ref().unwrap_or(&self.null_key);
        let value = record.value.as_ref().unwrap_or(&self.null_value);
        let cmd = pipe.cmd("XADD").arg(&*record.destination).arg("*");
        if self.extended {
            cmd.arg("key")
                .arg(key.as_ref())
                .arg("value")
                .arg(value.as_ref());
            // Debezium Server's order, names upper-cased (`Locale.ROOT`).
            for (name, value) in debezium_header_order(&record.headers) {
                let v = value.unwrap_or(&self.null_value);
                cmd.arg(name.to_uppercase()).arg(v.as_ref());
            }
        } else {
            cmd.arg(key.as_ref()).arg(value.as_ref());
        }
    }

    /// Why not to send now: Redis uses more of its memory than the
    /// threshold allows (Debezium Server's `RedisMemoryThreshold`).
    async fn over_memory(&mut self) -> Option<String> {
        if self.threshold == 0 {
            return None;
        }
        let info: String = match redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut self.conn)
            .await
        {
            Ok(info) => info,
            Err(e) => return Some(e.to_string()),
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let used = field("used_memory")?;
        // As Debezium Server: maxmemory, or memory_limit_mb when maxmemory
        // is unreadable or larger; a limit of 0 checks nothing.
        let limit_mb = self.limit_mb << 20;
        let limit = match field("maxmemory") {
            None => limit_mb,
            Some(max) if limit_mb > 0 && max > limit_mb => limit_mb,
            Some(max) => max,
        };
        if limit == 0 {
            return None;
        }
        let percent = used.saturating_mul(100) / limit;
        (percent >= u64::from(self.threshold)).then(|| {
            format!(
                "redis uses {percent}% of its memory limit ({used} of {limit} bytes), above memory_threshold_percentage {}",
                self.threshold
            )
        })
    }
}

/// One `XADD` reply: an entry id is the acknowledgement; `OOM` and
/// `BUSY`/`LOADING` pass; any other error refuses the record for good.
fn reply_outcome(reply: Value) -> Outcome {
    match reply {
        Value::ServerError(e) => {
            let code = e.code().to_owned();
            let text = format!("{code} {}", e.details().unwrap_or(""));
            match code.as_str() {
                "OOM" | "BUSY" | "LOADING" | "TRYAGAIN" | "MASTERDOWN" | "READONLY" => {
                    Outcome::Retry(text)
                }
                _ => Outcome::Failed {
                    class: FailureClass::Record {
                        kind: if code == "WRONGTYPE" {
                            "wrong_type"
                        } else {
                            "rejected"
                        },
                        too_large: false,
                    },
                    code: code.to_lowercase(),
                    error: text,
                },
            }
        }
        _ => Outcome::Acked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_host_and_port() {
        let c = RedisConfig {
            address: "localhost".into(),
            ..RedisConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.redis.address"));
        let c = RedisConfig {
            address: "127.0.0.1:6379".into(),
            message_format: Some("fancy".into()),
            ..RedisConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.redis.message_format"));
    }

    #[test]
    fn the_password_stays_out_of_debug() {
        let c = RedisConfig {
            address: "h:1".into(),
            password: Some(Secret::new("s3cr3t")),
            ..RedisConfig::default()
        };
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }
}
