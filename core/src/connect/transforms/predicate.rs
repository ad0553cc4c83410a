//! Connect's predicates (`org.apache.kafka.connect.transforms.predicates`):
//! `TopicNameMatches`, `HasHeaderKey`, `RecordIsTombstone`, tested on the
//! record as it is at that point of the chain (a topic renamed by an
//! earlier transform is the one matched). Pure.

use super::options::{Options, TransformConfigError};
use super::ConnectRecord;

/// `TopicNameMatches`'s class.
pub const TOPIC_NAME_MATCHES: &str =
    "org.apache.kafka.connect.transforms.predicates.TopicNameMatches";
/// `HasHeaderKey`'s class.
pub const HAS_HEADER_KEY: &str = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey";
/// `RecordIsTombstone`'s class.
pub const RECORD_IS_TOMBSTONE: &str =
    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone";

/// One configured predicate.
#[derive(Debug, Clone)]
pub enum Predicate {
    /// `TopicNameMatches`: Java's `Matcher.matches()` on the whole topic.
    TopicNameMatches {
        /// The pattern as configured.
        pattern: String,
        /// The pattern anchored at both ends.
        regex: regex::Regex,
    },
    /// `HasHeaderKey`: at least one header of that name.
    HasHeaderKey(String),
    /// `RecordIsTombstone`: a null value.
    RecordIsTombstone,
}

impl Predicate {
    /// Builds the predicate of `class` from its options.
    pub fn build(class: &str, options: &Options) -> Result<Predicate, TransformConfigError> {
        let r = options.reader();
        match class {
            TOPIC_NAME_MATCHES => {
                let pattern = r.string("pattern", None)?;
                if pattern.is_empty() {
                    return Err(TransformConfigError::invalid(
                        "pattern",
                        &pattern,
                        "String must be non-empty",
                    ));
                }
                let regex = anchored(&pattern).map_err(|e| {
                    TransformConfigError::invalid(
                        "pattern",
                        &pattern,
                        format!("entry must be a Java-compatible regular expression: {e}"),
                    )
                })?;
                Ok(Predicate::TopicNameMatches { pattern, regex })
            }
            HAS_HEADER_KEY => {
                let name = r.string("name", None)?;
                if name.is_empty() {
                    return Err(TransformConfigError::invalid(
                        "name",
                        &name,
                        "String must be non-empty",
                    ));
                }
                Ok(Predicate::HasHeaderKey(name))
            }
            RECORD_IS_TOMBSTONE => Ok(Predicate::RecordIsTombstone),
            other => Err(TransformConfigError::UnknownClass(other.to_owned())),
        }
    }

    /// `Predicate.test(record)`.
    pub fn test(&self, record: &ConnectRecord) -> bool {
        match self {
            Predicate::TopicNameMatches { regex, .. } => regex.is_match(&record.topic),
            Predicate::HasHeaderKey(name) => record.headers.iter().any(|h| *h.key == **name),
            Predicate::RecordIsTombstone => record.value.is_null(),
        }
    }

    /// A short description for messages: `TopicNameMatches("x.*")`.
    pub fn describe(&self) -> String {
        match self {
            Predicate::TopicNameMatches { pattern, .. } => format!("TopicNameMatches({pattern:?})"),
            Predicate::HasHeaderKey(name) => format!("HasHeaderKey({name:?})"),
            Predicate::RecordIsTombstone => "RecordIsTombstone".to_owned(),
        }
    }
}

/// A Java pattern matched with `Matcher.matches()`: the whole input.
pub fn anchored(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
}
