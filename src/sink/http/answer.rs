//! What a receiver's answer comes to: a status classified as acknowledged,
//! passing (sent again), unauthorized, rejected (the record's own) or
//! broken, and the outcome the worker hears for it.

use hyper::StatusCode;

use crate::sink::broker::FailureClass;
use crate::sink::queued::Outcome;

/// Most bytes of an answer's body quoted in an error.
const QUOTED_ANSWER: usize = 300;

/// Whether a status passes (sent again after a pause).
pub(super) fn transient(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429 | 500..=599)
}

/// `: <the answer's first bytes>`, or nothing for an empty answer.
pub(super) fn quote(body: &[u8]) -> String {
    if body.is_empty() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(QUOTED_ANSWER)]);
    let more = if body.len() > QUOTED_ANSWER {
        "..."
    } else {
        ""
    };
    format!(": {}{more}", text.trim())
}

/// What one request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    Acked,
    /// Sent again (5xx, 408, 429, timeouts, connections).
    Passing(String),
    /// 401 or 407: walrelay's credentials.
    Unauthorized(u16, String),
    /// Another 4xx: the record's own.
    Rejected(u16, String),
    /// Something else (a redirect, a status out of range): stops.
    Broken(String, String),
}

pub(super) fn classify(status: StatusCode, body: &[u8]) -> Verdict {
    let code = status.as_u16();
    let text = format!("the receiver answered {status}{}", quote(body));
    match code {
        200..=299 => Verdict::Acked,
        _ if transient(status) => Verdict::Passing(text),
        401 | 407 => Verdict::Unauthorized(code, text),
        400..=499 => Verdict::Rejected(code, text),
        300..=399 => Verdict::Broken(
            format!("redirect_{code}"),
            format!(
                "{text}; walrelay follows no redirect: set sink.http.url to the final location"
            ),
        ),
        _ => Verdict::Broken(format!("unexpected_{code}"), text),
    }
}

/// The kind (a metric label) of a 4xx refusal.
pub(super) fn rejected_kind(code: u16) -> &'static str {
    match code {
        400 => "rejected_400",
        402 => "rejected_402",
        403 => "rejected_403",
        404 => "rejected_404",
        405 => "rejected_405",
        406 => "rejected_406",
        409 => "rejected_409",
        410 => "rejected_410",
        411 => "rejected_411",
        412 => "rejected_412",
        413 => "rejected_413",
        414 => "rejected_414",
        415 => "rejected_415",
        416 => "rejected_416",
        417 => "rejected_417",
        418 => "rejected_418",
        421 => "rejected_421",
        422 => "rejected_422",
        423 => "rejected_423",
        424 => "rejected_424",
        425 => "rejected_425",
        426 => "rejected_426",
        428 => "rejected_428",
        431 => "rejected_431",
        451 => "rejected_451",
        _ => "rejected_4xx",
    }
}

pub(super) fn refused(kind: &'static str, too_large: bool, code: String, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Record { kind, too_large },
        code,
        error,
    }
}

pub(super) fn broken(code: impl Into<String>, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Broker,
        code: code.into(),
        error,
    }
}

pub(super) fn invalid_header(name: &str, what: &str) -> Outcome {
    refused(
        "invalid_header",
        false,
        "invalid_header".into(),
        format!("header {name:?} cannot be an HTTP header ({what})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let v = |code: u16| classify(StatusCode::from_u16(code).unwrap(), b"why");
        assert_eq!(v(200), Verdict::Acked);
        assert_eq!(v(204), Verdict::Acked);
        for passing in [500, 502, 503, 504, 408, 429] {
            assert!(matches!(v(passing), Verdict::Passing(_)), "{passing}");
        }
        assert!(
            matches!(v(400), Verdict::Rejected(400, t) if t.contains("400") && t.contains("why"))
        );
        assert!(matches!(v(422), Verdict::Rejected(422, _)));
        assert!(matches!(v(401), Verdict::Unauthorized(401, _)));
        assert!(matches!(v(301), Verdict::Broken(code, _) if code == "redirect_301"));
        assert_eq!(rejected_kind(404), "rejected_404");
        assert_eq!(rejected_kind(499), "rejected_4xx");
    }
}
