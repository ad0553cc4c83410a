//! How HTTP requests are authenticated: a fixed `Authorization` value
//! (basic, bearer), Debezium Server's `jwt` and `oauth2` client-credentials
//! token flows (their request bodies, renewal at 90 % of a lifetime, the
//! endpoint's answer classified as passing or refused), and the Standard
//! Webhooks signature. Never logs a credential.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use openssl::pkey::{PKey, Private};
use serde::{Deserialize, Serialize};

use super::answer::{quote, transient};
use super::client::Endpoint;
use super::config::{HttpConfig, DEFAULT_JWT_REFRESH_MINUTES, DEFAULT_JWT_TOKEN_MINUTES};
use crate::secret::Secret;

/// A token is renewed at this share of its lifetime (Debezium Server's).
const TOKEN_LIFETIME_USED: f64 = 0.9;

/// The Standard Webhooks key from its secret: base64 after an optional
/// `whsec_`, 24 to 64 bytes (Debezium Server's check).
pub(super) fn webhook_key(secret: &str) -> Result<PKey<Private>, String> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = openssl::base64::decode_block(b64)
        .map_err(|_| "is not base64 (optionally after whsec_)".to_owned())?;
    if !(24..=64).contains(&key.len()) {
        return Err(format!(
            "decodes to {} bytes; a Standard Webhooks secret has 24 to 64",
            key.len()
        ));
    }
    PKey::hmac(&key).map_err(|e| e.to_string())
}

/// `v1,<base64 of HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
pub(super) fn webhook_signature(
    key: &PKey<Private>,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Result<String, String> {
    let mut signer = openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), key)
        .map_err(|e| e.to_string())?;
    let mut signed = Vec::with_capacity(id.len() + body.len() + 24);
    signed.extend_from_slice(id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(timestamp.to_string().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    let mac = signer
        .sign_oneshot_to_vec(&signed)
        .map_err(|e| e.to_string())?;
    Ok(format!("v1,{}", openssl::base64::encode_block(&mac)))
}

/// Java's `URLEncoder.encode(s, UTF_8)`: what OAuth2's form body holds.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A token of the `jwt` or `oauth2` flow.
pub(super) struct Token {
    /// The whole `Authorization` value.
    header: HeaderValue,
    /// When to get a new one.
    renew_at: Instant,
    /// JWT: the refresh token.
    refresh: Option<String>,
    /// A request carrying it was acknowledged.
    pub(super) proven: bool,
    /// Told apart from the token a request carried.
    pub(super) generation: u64,
}

impl Token {
    /// The `Authorization` value and generation of `token` while it is
    /// not due for renewal at `now`.
    fn current(token: Option<&Token>, now: Instant) -> Option<(HeaderValue, u64)> {
        token
            .filter(|t| t.renew_at > now)
            .map(|t| (t.header.clone(), t.generation))
    }

    /// Puts a new token in `slot`, of the next generation, not proven yet;
    /// its `Authorization` value and generation.
    fn issue(
        slot: &mut Option<Token>,
        header: HeaderValue,
        renew_at: Instant,
        refresh: Option<String>,
        generation: &mut u64,
    ) -> (HeaderValue, u64) {
        *generation += 1;
        *slot = Some(Token {
            header: header.clone(),
            renew_at,
            refresh,
            proven: false,
            generation: *generation,
        });
        (header, *generation)
    }
}

/// Debezium Server's JWT request bodies: snake case
/// (`@JsonNaming(SnakeCaseStrategy)`), fields in Jackson's order.
#[derive(Serialize)]
struct JwtLogin<'a> {
    username: &'a str,
    password: &'a str,
    token_expiry_in_minutes: u64,
    refresh_token_expiry_in_minutes: u64,
}

#[derive(Serialize)]
struct JwtRefresh<'a> {
    jwt_refresh_token: &'a str,
    token_expiry_in_minutes: u64,
    refresh_token_expiry_in_minutes: u64,
}

/// Its answer, snake case too (unknown fields are ignored, where Jackson
/// would fail on them).
#[derive(Deserialize)]
struct JwtAnswer {
    jwt: String,
    #[serde(default)]
    jwt_refresh_token: Option<String>,
    /// Milliseconds.
    #[serde(default)]
    expires_in: u64,
}

#[derive(Deserialize)]
struct OAuth2Answer {
    access_token: Option<String>,
    /// Seconds.
    #[serde(default)]
    expires_in: u64,
}

/// How requests are authenticated.
pub(super) enum Auth {
    None,
    /// A fixed `Authorization` value (basic, bearer).
    Fixed(HeaderValue),
    Jwt(Jwt),
    OAuth2(OAuth2),
    /// Standard Webhooks: signed per request (in [`super::deliver::deliver`]).
    Webhook,
}

/// Debezium Server's JWT flow: a login, then refreshes with the refresh
/// token.
pub(super) struct Jwt {
    /// `<jwt_url>auth/authenticate`.
    endpoint: Endpoint,
    /// `<jwt_url>auth/refreshToken`.
    refresh_endpoint: Endpoint,
    username: String,
    password: Secret,
    /// Lifetime asked for the token, minutes.
    minutes: u64,
    /// Lifetime asked for the refresh token, minutes.
    refresh_minutes: u64,
    /// The current token; `None` until the first login and after a
    /// failed renewal.
    token: Option<Token>,
}

/// OAuth2 client credentials: a token from the token endpoint, asked for
/// again when it is due.
pub(super) struct OAuth2 {
    endpoint: Endpoint,
    client_id: String,
    client_secret: Secret,
    /// The `scope` of the form; `None` sends none.
    scope: Option<String>,
    /// The current token; `None` until the first and after a failed
    /// renewal.
    token: Option<Token>,
}

/// Why no token could be had.
pub(super) enum TokenError {
    /// The endpoint may answer later (unreachable, 5xx, 408, 429).
    Passing(String),
    /// It refused or answered something unusable.
    Refused(String),
}

impl Auth {
    pub(super) fn of(c: &HttpConfig) -> Result<Auth, String> {
        let tls = || c.tls(true);
        if let (Some(user), Some(password)) = (&c.user, &c.password) {
            let pair = format!("{user}:{}", password.expose());
            let value = format!("Basic {}", openssl::base64::encode_block(pair.as_bytes()));
            return fixed(value);
        }
        if let Some(token) = &c.bearer_token {
            return fixed(format!("Bearer {}", token.expose()));
        }
        if let (Some(base), Some(username), Some(password)) =
            (&c.jwt_url, &c.jwt_username, &c.jwt_password)
        {
            // Debezium Server appends the paths to the base as it is.
            return Ok(Auth::Jwt(Jwt {
                endpoint: Endpoint::new(&format!("{base}auth/authenticate"), tls)?,
                refresh_endpoint: Endpoint::new(&format!("{base}auth/refreshToken"), tls)?,
                username: username.clone(),
                password: password.clone(),
                minutes: c
                    .jwt_token_expiration_minutes
                    .unwrap_or(DEFAULT_JWT_TOKEN_MINUTES),
                refresh_minutes: c
                    .jwt_refresh_token_expiration_minutes
                    .unwrap_or(DEFAULT_JWT_REFRESH_MINUTES),
                token: None,
            }));
        }
        if let (Some(url), Some(id), Some(secret)) = (
            &c.oauth2_token_url,
            &c.oauth2_client_id,
            &c.oauth2_client_secret,
        ) {
            return Ok(Auth::OAuth2(OAuth2 {
                endpoint: Endpoint::new(url, tls)?,
                client_id: id.clone(),
                client_secret: secret.clone(),
                scope: c.oauth2_scope.clone().filter(|s| !s.is_empty()),
                token: None,
            }));
        }
        if c.webhook_secret.is_some() {
            return Ok(Auth::Webhook);
        }
        Ok(Auth::None)
    }

    pub(super) fn token(&mut self) -> Option<&mut Option<Token>> {
        match self {
            Auth::Jwt(Jwt { token, .. }) | Auth::OAuth2(OAuth2 { token, .. }) => Some(token),
            _ => None,
        }
    }

    /// The `Authorization` value for the next request and the generation
    /// of its token (0: none), getting a token first when needed.
    pub(super) async fn authorization(
        &mut self,
        timeout: Duration,
        generation: &mut u64,
    ) -> Result<Option<(HeaderValue, u64)>, TokenError> {
        let now = Instant::now();
        match self {
            Auth::None | Auth::Webhook => Ok(None),
            Auth::Fixed(v) => Ok(Some((v.clone(), 0))),
            Auth::Jwt(jwt) => jwt.authorization(now, timeout, generation).await.map(Some),
            Auth::OAuth2(oauth2) => oauth2
                .authorization(now, timeout, generation)
                .await
                .map(Some),
        }
    }
}

impl Jwt {
    /// The token's `Authorization` value and generation: the current one
    /// while it is not due, else a refreshed one, else a new login.
    async fn authorization(
        &mut self,
        now: Instant,
        timeout: Duration,
        generation: &mut u64,
    ) -> Result<(HeaderValue, u64), TokenError> {
        if let Some(current) = Token::current(self.token.as_ref(), now) {
            return Ok(current);
        }
        // An expired token is refreshed with its refresh token
        // (Debezium Server's order); a refused refresh logs in.
        let refresh = self.token.as_ref().and_then(|t| t.refresh.clone());
        self.token = None;
        let mut answer = Err(TokenError::Refused(String::new()));
        if let Some(refresh) = refresh {
            answer = self.refresh(&refresh, timeout).await;
        }
        if matches!(answer, Err(TokenError::Refused(_))) {
            answer = self.login(timeout).await;
        }
        let parsed: JwtAnswer = serde_json::from_slice(&answer?).map_err(|e| {
            TokenError::Refused(format!("the JWT endpoint's answer is unusable: {e}"))
        })?;
        // Debezium Server's JWTAuthenticator: "Bearer:" with a colon.
        let header = HeaderValue::from_str(&format!("Bearer: {}", parsed.jwt))
            .map_err(|_| TokenError::Refused("the JWT is not a header value".into()))?;
        let renew_at = now + lifetime(parsed.expires_in as f64 / 1000.0);
        Ok(Token::issue(
            &mut self.token,
            header,
            renew_at,
            parsed.jwt_refresh_token,
            generation,
        ))
    }

    /// `auth/refreshToken` with the refresh token.
    async fn refresh(&self, refresh: &str, timeout: Duration) -> Result<Bytes, TokenError> {
        let body = serde_json::to_vec(&JwtRefresh {
            jwt_refresh_token: refresh,
            token_expiry_in_minutes: self.minutes,
            refresh_token_expiry_in_minutes: self.refresh_minutes,
        })
        .expect("a JSON object");
        token_call(
            &self.refresh_endpoint,
            json_headers(),
            Bytes::from(body),
            timeout,
        )
        .await
    }

    /// `auth/authenticate` with the user name and password.
    async fn login(&self, timeout: Duration) -> Result<Bytes, TokenError> {
        let body = serde_json::to_vec(&JwtLogin {
            username: &self.username,
            password: self.password.expose(),
            token_expiry_in_minutes: self.minutes,
            refresh_token_expiry_in_minutes: self.refresh_minutes,
        })
        .expect("a JSON object");
        token_call(&self.endpoint, json_headers(), Bytes::from(body), timeout).await
    }
}

impl OAuth2 {
    /// The token's `Authorization` value and generation: the current one
    /// while it is not due, else a new one from the token endpoint.
    async fn authorization(
        &mut self,
        now: Instant,
        timeout: Duration,
        generation: &mut u64,
    ) -> Result<(HeaderValue, u64), TokenError> {
        if let Some(current) = Token::current(self.token.as_ref(), now) {
            return Ok(current);
        }
        self.token = None;
        let mut body = String::from("grant_type=client_credentials");
        if let Some(scope) = &self.scope {
            body.push_str("&scope=");
            body.push_str(&form_encode(scope));
        }
        let answer =
            token_call(&self.endpoint, self.headers()?, Bytes::from(body), timeout).await?;
        let parsed: OAuth2Answer = serde_json::from_slice(&answer).map_err(|e| {
            TokenError::Refused(format!(
                "the OAuth2 token endpoint's answer is unusable: {e}"
            ))
        })?;
        let access = parsed
            .access_token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                TokenError::Refused("the OAuth2 token answer has no access_token".into())
            })?;
        let header = HeaderValue::from_str(&format!("Bearer {access}"))
            .map_err(|_| TokenError::Refused("the access token is not a header value".into()))?;
        let renew_at = now + lifetime(parsed.expires_in as f64);
        Ok(Token::issue(
            &mut self.token,
            header,
            renew_at,
            None,
            generation,
        ))
    }

    /// The token request's headers: a form, the client credentials as
    /// HTTP basic.
    fn headers(&self) -> Result<HeaderMap, TokenError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let pair = format!("{}:{}", self.client_id, self.client_secret.expose());
        let basic = format!("Basic {}", openssl::base64::encode_block(pair.as_bytes()));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&basic).map_err(|_| {
                TokenError::Refused("the client credentials are not a header value".into())
            })?,
        );
        Ok(headers)
    }
}

fn fixed(value: String) -> Result<Auth, String> {
    HeaderValue::from_str(&value)
        .map(|mut v| {
            v.set_sensitive(true);
            Auth::Fixed(v)
        })
        .map_err(|_| "the credentials are not a header value".to_owned())
}

fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h
}

/// 90 % of a lifetime of `seconds` (Debezium Server renews then).
fn lifetime(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds * TOKEN_LIFETIME_USED).max(0.0))
}

/// A token endpoint's answer body, or why there is none.
async fn token_call(
    endpoint: &Endpoint,
    headers: HeaderMap,
    body: Bytes,
    timeout: Duration,
) -> Result<Bytes, TokenError> {
    let origin = &endpoint.target.origin;
    match endpoint.fetch(headers, body, timeout).await {
        Err(e) => Err(TokenError::Passing(e)),
        Ok((status, body)) if status.is_success() => Ok(body),
        Ok((status, body)) => {
            let text = format!(
                "the token endpoint {origin} answered {status}{}",
                quote(&body)
            );
            if transient(status) {
                Err(TokenError::Passing(text))
            } else {
                Err(TokenError::Refused(text))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's own example.
    #[test]
    fn webhook_signatures_follow_the_specification() {
        let key = webhook_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = webhook_signature(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(webhook_key("whsec_c2hvcnQ=").is_err(), "5 bytes");
    }

    #[test]
    fn form_values_are_encoded_as_java_does() {
        assert_eq!(form_encode("read write:all"), "read+write%3Aall");
        assert_eq!(form_encode("a.b-c*d_e~"), "a.b-c*d_e%7E");
    }

    #[test]
    fn jwt_requests_are_snake_case_in_jacksons_order() {
        let body = serde_json::to_string(&JwtLogin {
            username: "u",
            password: "p",
            token_expiry_in_minutes: 60,
            refresh_token_expiry_in_minutes: 1440,
        })
        .unwrap();
        assert_eq!(
            body,
            r#"{"username":"u","password":"p","token_expiry_in_minutes":60,"refresh_token_expiry_in_minutes":1440}"#
        );
    }
}
