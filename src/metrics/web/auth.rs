//! Basic authentication of the listener, as the exporter-toolkit does
//! it: `basic_auth_users` maps a user to a bcrypt hash; a request without
//! valid credentials is answered 401 with `WWW-Authenticate: Basic` and a
//! body that says nothing of why.
//!
//! Owns the hashes and the verification. An unknown user still costs one
//! bcrypt verification (against a hash of the same cost made at start), so
//! timing does not tell which users exist; verifications run one at a time
//! off the async threads (bcrypt is slow on purpose). A success is
//! remembered for [`CACHE_TTL`] under a SHA-256 of the user, password and
//! hash (never the password itself), because the operator's page polls
//! `/api/state` every second and each poll would otherwise cost a bcrypt;
//! failures are never remembered, so a guess always costs one. It never
//! logs a user, password or hash.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hyper::header::{HeaderMap, AUTHORIZATION};

use crate::secret::Secret;

use super::WebConfigError;

/// How long a successful verification is remembered.
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(60);
/// At most this many remembered successes (the oldest go first).
const CACHE_ENTRIES: usize = 100;

/// The users and what verifying them needs.
pub(crate) struct BasicAuth {
    /// User to hash.
    users: HashMap<String, Secret>,
    /// A hash of a random password at the users' highest cost, verified
    /// for an unknown user.
    decoy: Secret,
    /// Recent successes: digest to when they expire.
    cache: Mutex<HashMap<[u8; 32], Instant>>,
    /// One bcrypt at a time, as the toolkit.
    bcrypt: Mutex<()>,
}

impl BasicAuth {
    /// The users of `basic_auth_users` (`None` when there are none), every
    /// hash checked to be bcrypt's; `path` is the file, for the messages.
    pub(super) fn new(
        users: BTreeMap<String, Secret>,
        path: &Path,
    ) -> Result<Option<Arc<BasicAuth>>, WebConfigError> {
        let mut cost = 0;
        for (user, hash) in &users {
            let parts: bcrypt::HashParts =
                hash.expose().parse().map_err(|_| WebConfigError::Invalid {
                    path: path.to_owned(),
                    key: format!("basic_auth_users.{user}"),
                    reason:
                        "not a bcrypt hash (make one with htpasswd -nBC 10 \"\" | tr -d ':\\n')"
                            .into(),
                })?;
            cost = cost.max(parts.get_cost());
        }
        if users.is_empty() {
            return Ok(None);
        }
        let random = format!("{:032x}", rand::random::<u128>());
        let decoy = bcrypt::hash(random, cost).map_err(|e| WebConfigError::Invalid {
            path: path.to_owned(),
            key: "basic_auth_users".into(),
            reason: format!("cannot make the decoy hash: {e}"),
        })?;
        Ok(Some(Arc::new(BasicAuth {
            users: users.into_iter().collect(),
            decoy: Secret::new(decoy),
            cache: Mutex::new(HashMap::new()),
            bcrypt: Mutex::new(()),
        })))
    }

    /// Whether `headers` carry the credentials of a user (bcrypt runs on a
    /// blocking thread).
    pub(crate) async fn allows(self: &Arc<Self>, headers: &HeaderMap) -> bool {
        let Some((user, password)) = credentials(headers) else {
            return false;
        };
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || this.verify(&user, password.expose()))
            .await
            .unwrap_or(false)
    }

    /// Whether `password` is `user`'s; an unknown user costs the same.
    pub(crate) fn verify(&self, user: &str, password: &str) -> bool {
        let known = self.users.get(user);
        let hash = known.unwrap_or(&self.decoy);
        let digest = digest(user, password, hash.expose());
        let now = Instant::now();
        if let Ok(cache) = self.cache.lock() {
            if cache.get(&digest).is_some_and(|until| *until > now) {
                return known.is_some();
            }
        }
        let matches = {
            let _one_at_a_time = self.bcrypt.lock();
            bcrypt::verify(password, hash.expose()).unwrap_or(false)
        };
        let ok = matches && known.is_some();
        if ok {
            self.remember(digest, now);
        }
        ok
    }

    /// Remembers a success, dropping expired ones (and the oldest when
    /// full).
    fn remember(&self, digest: [u8; 32], now: Instant) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        cache.retain(|_, until| *until > now);
        if cache.len() >= CACHE_ENTRIES {
            if let Some(oldest) = cache.iter().min_by_key(|(_, t)| **t).map(|(d, _)| *d) {
                cache.remove(&oldest);
            }
        }
        cache.insert(digest, now + CACHE_TTL);
    }

    /// The decoy hash (tests compare its cost).
    #[cfg(test)]
    pub(crate) fn decoy_hash(&self) -> &str {
        self.decoy.expose()
    }

    /// How many users there are (for `Debug`, which shows no name).
    pub(crate) fn len(&self) -> usize {
        self.users.len()
    }
}

/// The user and password of an `Authorization: Basic` header, as Go's
/// `Request.BasicAuth` reads it; `None` for anything else.
fn credentials(headers: &HeaderMap) -> Option<(String, Secret)> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case("basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), Secret::new(password)))
}

/// SHA-256 of the user, password and hash, each length-prefixed.
fn digest(user: &str, password: &str, hash: &str) -> [u8; 32] {
    let mut h = openssl::sha::Sha256::new();
    for part in [user, password, hash] {
        h.update(&(part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finish()
}
