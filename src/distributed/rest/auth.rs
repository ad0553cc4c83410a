//! HTTP basic auth as Connect's `BasicAuthSecurityRestExtension` does it:
//! users from the `KafkaConnect` section of the JAAS file named by
//! `-Djava.security.auth.login.config=` in `KAFKA_OPTS`, whose
//! `PropertyFileLoginModule` names a credentials properties file
//! (`user=password` or `user: password`).
//!
//! Owns reading those two files and checking an `Authorization` header.
//! Passwords live in [`Secret`]s, are compared in constant time, and never
//! reach a log line, an error or Debug output.

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::distributed::api::ApiError;
use crate::secret::Secret;

use super::config::RestConfigError;

/// The login module walrelay understands in the `KafkaConnect` section.
const LOGIN_MODULE: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule";

/// The body Connect's filter answers 401 with.
pub(crate) const UNAUTHORIZED_BODY: &str = "User cannot access the resource.";

/// The users allowed in.
#[derive(Debug, Clone)]
pub(crate) struct BasicAuth {
    /// User → password. Empty: every request is let in (Connect's rule
    /// for an empty credentials file).
    pub(crate) users: BTreeMap<String, Secret>,
}

/// What a request's credentials are worth.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Let in.
    Allowed,
    /// 401.
    Denied,
    /// Connect fails the request itself (a bad base64 header: 500).
    Failed(ApiError),
}

impl BasicAuth {
    /// Reads the JAAS file named in `KAFKA_OPTS` and its credentials file.
    pub(crate) fn from_env(
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<BasicAuth, RestConfigError> {
        const KEY: &str = "rest.extension.classes";
        let opts = env("KAFKA_OPTS").unwrap_or_default();
        let jaas_path = jaas_path(&opts).ok_or_else(|| {
            RestConfigError::new(
                KEY,
                "the basic auth extension needs a JAAS file: set KAFKA_OPTS=-Djava.security.auth.login.config=FILE",
            )
        })?;
        let jaas = std::fs::read_to_string(&jaas_path).map_err(|e| {
            RestConfigError::new(KEY, format!("cannot read the JAAS file {jaas_path}: {e}"))
        })?;
        let file = credentials_file(&jaas)
            .map_err(|why| RestConfigError::new(KEY, format!("JAAS file {jaas_path}: {why}")))?;
        let text = std::fs::read_to_string(&file).map_err(|e| {
            RestConfigError::new(KEY, format!("cannot read the credentials file {file}: {e}"))
        })?;
        let users = parse_properties(&text)
            .into_iter()
            .map(|(k, v)| (k, Secret::new(v)))
            .collect::<BTreeMap<_, _>>();
        if users.is_empty() {
            tracing::warn!(file = %file, "credentials file is empty; all requests will be permitted");
        }
        Ok(BasicAuth { users })
    }

    /// Checks an `Authorization` header as `JaasBasicAuthFilter` and
    /// `PropertyFileLoginModule` do.
    pub(crate) fn check(&self, header: Option<&[u8]>) -> Verdict {
        if self.users.is_empty() {
            return Verdict::Allowed;
        }
        let Some(header) = header else {
            return Verdict::Denied;
        };
        let header = String::from_utf8_lossy(header);
        let Some(space) = header.find(' ').filter(|i| *i > 0) else {
            return Verdict::Denied;
        };
        if !header[..space].eq_ignore_ascii_case("basic") {
            return Verdict::Denied;
        }
        let decoded = match java_base64_decode(&header[space + 1..]) {
            Ok(d) => d,
            Err(message) => return Verdict::Failed(ApiError::new(500, message)),
        };
        let decoded = String::from_utf8_lossy(&decoded);
        let Some(colon) = decoded.find(':').filter(|i| *i > 0) else {
            return Verdict::Denied;
        };
        let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
        match self.users.get(user) {
            Some(expected) if ct_eq(expected.expose().as_bytes(), password.as_bytes()) => {
                Verdict::Allowed
            }
            _ => Verdict::Denied,
        }
    }
}

/// Compares without stopping at the first difference.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// `java.util.Base64.getDecoder().decode`, with Java's messages for the
/// errors Connect then answers 500 with.
fn java_base64_decode(s: &str) -> Result<Vec<u8>, String> {
    for b in s.bytes() {
        if !(b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=') {
            return Err(format!("Illegal base64 character {}", java_hex(b as i8)));
        }
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    engine.decode(s).map_err(|e| match e {
        base64::DecodeError::InvalidLength(_) => "Last unit does not have enough valid bits".into(),
        _ => "Input byte array has wrong 4-byte ending unit".into(),
    })
}

/// `Integer.toString(b, 16)` of a signed byte.
fn java_hex(b: i8) -> String {
    if b < 0 {
        format!("-{:x}", -i16::from(b))
    } else {
        format!("{b:x}")
    }
}

/// The JAAS file named in `KAFKA_OPTS` (`-Djava.security.auth.login.config=`,
/// optionally `==`, optionally quoted).
fn jaas_path(opts: &str) -> Option<String> {
    const FLAG: &str = "-Djava.security.auth.login.config=";
    let start = opts.find(FLAG)? + FLAG.len();
    let rest = opts[start..].strip_prefix('=').unwrap_or(&opts[start..]);
    let path = match rest.chars().next() {
        Some(q @ ('"' | '\'')) => rest[1..].split(q).next().unwrap_or(""),
        _ => rest.split_whitespace().next().unwrap_or(""),
    };
    (!path.is_empty()).then(|| path.to_owned())
}

/// JAAS tokens: words, quoted strings, `{ } ; =`; comments dropped.
fn jaas_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') || c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if "{};=".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else if c == '"' || c == '\'' {
            let mut s = String::from("\"");
            i += 1;
            while i < chars.len() && chars[i] != c {
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            out.push(s);
        } else {
            let mut s = String::new();
            while i < chars.len() && !chars[i].is_whitespace() && !"{};=\"'".contains(chars[i]) {
                s.push(chars[i]);
                i += 1;
            }
            out.push(s);
        }
    }
    out
}

/// The `file` option of the `KafkaConnect` section's
/// `PropertyFileLoginModule`; any other module there is refused.
fn credentials_file(jaas: &str) -> Result<String, String> {
    let tokens = jaas_tokens(jaas);
    let start = tokens
        .windows(2)
        .position(|w| w[0] == "KafkaConnect" && w[1] == "{")
        .ok_or("no KafkaConnect section")?;
    let mut i = start + 2;
    let mut file = None;
    while i < tokens.len() && tokens[i] != "}" {
        let module = &tokens[i];
        if module != LOGIN_MODULE {
            return Err(format!("walrelay has only {LOGIN_MODULE}, not {module}"));
        }
        i += 2; // the module and its flag
        while i < tokens.len() && tokens[i] != ";" {
            if tokens.get(i + 1).map(String::as_str) == Some("=") {
                let value = tokens
                    .get(i + 2)
                    .map(|v| v.trim_start_matches('"').to_owned());
                if tokens[i] == "file" {
                    file = value;
                }
                i += 3;
            } else {
                i += 1;
            }
        }
        i += 1;
    }
    file.filter(|f| !f.trim().is_empty())
        .ok_or_else(|| "Property Credentials file must be specified".into())
}

/// Java's `Properties.load`: `key=value`, `key: value` or `key value`;
/// `#`/`!` comments, `\` continuations and escapes.
pub(crate) fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let part = line.trim_start();
        if current.is_empty() && (part.is_empty() || part.starts_with('#') || part.starts_with('!'))
        {
            continue;
        }
        let trailing = part.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            current.push_str(&part[..part.len() - 1]);
        } else {
            current.push_str(part);
            logical.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        logical.push(current);
    }
    logical.iter().map(|l| split_property(l)).collect()
}

/// One logical line into key and value.
fn split_property(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut key_end = chars.len();
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '=' | ':' => {
                key_end = i;
                break;
            }
            c if c.is_whitespace() => {
                key_end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let mut j = key_end;
    while j < chars.len() && chars[j].is_whitespace() {
        j += 1;
    }
    if j < chars.len() && (chars[j] == '=' || chars[j] == ':') {
        j += 1;
    }
    while j < chars.len() && chars[j].is_whitespace() {
        j += 1;
    }
    let key: String = chars[..key_end.min(chars.len())].iter().collect();
    let value: String = chars[j.min(chars.len())..].iter().collect();
    (unescape(&key), unescape(&value))
}

/// Java properties escapes.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_properties_as_java() {
        let p =
            parse_properties("# c\n! c\nalice=secret\nbob: pw two\ncarol  x\\\n   y\nd\\:e=f\n");
        assert_eq!(
            p,
            vec![
                ("alice".into(), "secret".into()),
                ("bob".into(), "pw two".into()),
                ("carol".into(), "xy".into()),
                ("d:e".into(), "f".into()),
            ]
        );
    }

    #[test]
    fn finds_the_credentials_file() {
        let jaas = "// c\nKafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file=\"/etc/creds.properties\";\n};\nOther { x required; };";
        assert_eq!(credentials_file(jaas), Ok("/etc/creds.properties".into()));
        assert!(credentials_file("KafkaConnect { com.Other required; };").is_err());
        assert_eq!(
            jaas_path("-Xmx1g -Djava.security.auth.login.config=/etc/jaas.conf -Dx=y"),
            Some("/etc/jaas.conf".into())
        );
    }

    #[test]
    fn checks_headers_as_the_filter() {
        let auth = BasicAuth {
            users: [("alice".to_owned(), Secret::new("pw"))]
                .into_iter()
                .collect(),
        };
        let b64 = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        assert_eq!(
            auth.check(Some(b64("alice:pw").as_bytes())),
            Verdict::Allowed
        );
        assert_eq!(
            auth.check(Some(b64("alice:px").as_bytes())),
            Verdict::Denied
        );
        assert_eq!(auth.check(Some(b64("bob:pw").as_bytes())), Verdict::Denied);
        assert_eq!(auth.check(None), Verdict::Denied);
        assert_eq!(auth.check(Some(b"Bearer x")), Verdict::Denied);
        assert_eq!(
            auth.check(Some(b"Basic a.b")),
            Verdict::Failed(ApiError::new(500, "Illegal base64 character 2e"))
        );
        assert!(!format!("{auth:?}").contains("pw"));
    }
}
