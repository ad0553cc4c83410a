//! A transform's options as Connect's `ConfigDef` reads them: strings in,
//! typed values out (`STRING`, `LIST`, `BOOLEAN`, `INT`, `LONG`), with the
//! defaults and validators each transform declares, and the options no
//! transform read (Connect ignores them; walrelay says so). Pure.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// A transform's options, as the connector file spells them (without the
/// `transforms.<alias>.` prefix).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options(pub BTreeMap<String, String>);

impl Options {
    /// A reader that remembers which options were read.
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            map: &self.0,
            read: RefCell::new(BTreeSet::new()),
        }
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Options {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Options(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// A transform configuration Connect would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformConfigError {
    /// `ConfigException: Missing required configuration "<key>" which has no default value.`
    #[error("option {key} is required and has no default")]
    Missing {
        /// The option.
        key: String,
    },
    /// `ConfigException: Invalid value <value> for configuration <key>: <reason>`.
    #[error("option {key} = {value:?} is invalid: {reason}")]
    Invalid {
        /// The option.
        key: String,
        /// Its value as written.
        value: String,
        /// Why.
        reason: String,
    },
    /// A class walrelay does not run after the router.
    #[error("walrelay does not run the transform {0}")]
    UnknownClass(String),
}

impl TransformConfigError {
    /// `Invalid value ... for configuration key: reason`.
    pub fn invalid(key: &str, value: &str, reason: impl Into<String>) -> TransformConfigError {
        TransformConfigError::Invalid {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }

    /// The option it names, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            TransformConfigError::Missing { key } | TransformConfigError::Invalid { key, .. } => {
                Some(key)
            }
            TransformConfigError::UnknownClass(_) => None,
        }
    }
}

/// Reads typed options and remembers which were read.
#[derive(Debug)]
pub struct Reader<'a> {
    map: &'a BTreeMap<String, String>,
    read: RefCell<BTreeSet<String>>,
}

impl Reader<'_> {
    /// The raw text of `key`, marking it read.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.read.borrow_mut().insert(key.to_owned());
        self.map.get(key).map(String::as_str)
    }

    /// A `STRING` option with a default (`None`: required).
    pub fn string(&self, key: &str, default: Option<&str>) -> Result<String, TransformConfigError> {
        match (self.raw(key), default) {
            // ConfigDef trims STRING values.
            (Some(v), _) => Ok(v.trim().to_owned()),
            (None, Some(d)) => Ok(d.to_owned()),
            (None, None) => Err(TransformConfigError::Missing {
                key: key.to_owned(),
            }),
        }
    }

    /// An optional `STRING` option whose default is null.
    pub fn string_or_null(&self, key: &str) -> Option<String> {
        self.raw(key).map(|v| v.trim().to_owned())
    }

    /// A `LIST` option: comma-separated, each item trimmed; an empty text
    /// is the empty list.
    pub fn list(
        &self,
        key: &str,
        default: Option<&[&str]>,
    ) -> Result<Vec<String>, TransformConfigError> {
        match (self.raw(key), default) {
            (Some(v), _) => Ok(split_list(v)),
            (None, Some(d)) => Ok(d.iter().map(|s| (*s).to_owned()).collect()),
            (None, None) => Err(TransformConfigError::Missing {
                key: key.to_owned(),
            }),
        }
    }

    /// A `BOOLEAN` option: `true`/`false` in any case, trimmed.
    pub fn boolean(&self, key: &str, default: bool) -> Result<bool, TransformConfigError> {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(TransformConfigError::invalid(
                key,
                v,
                "Expected value to be either true or false",
            )),
        }
    }

    /// An `INT` option.
    pub fn int(&self, key: &str, default: Option<i32>) -> Result<i32, TransformConfigError> {
        match (self.raw(key), default) {
            (Some(v), _) => v
                .trim()
                .parse()
                .map_err(|_| TransformConfigError::invalid(key, v, "Not a number of type INT")),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(TransformConfigError::Missing {
                key: key.to_owned(),
            }),
        }
    }

    /// A `LONG` option.
    pub fn long(&self, key: &str, default: Option<i64>) -> Result<i64, TransformConfigError> {
        match (self.raw(key), default) {
            (Some(v), _) => v
                .trim()
                .parse()
                .map_err(|_| TransformConfigError::invalid(key, v, "Not a number of type LONG")),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(TransformConfigError::Missing {
                key: key.to_owned(),
            }),
        }
    }

    /// A `STRING` option that must be one of `allowed` (`ValidString.in`,
    /// case-sensitive).
    pub fn one_of(
        &self,
        key: &str,
        default: &str,
        allowed: &[&str],
    ) -> Result<String, TransformConfigError> {
        let v = self.string(key, Some(default))?;
        if allowed.contains(&v.as_str()) {
            return Ok(v);
        }
        Err(TransformConfigError::invalid(
            key,
            &v,
            format!("String must be one of: {}", allowed.join(", ")),
        ))
    }

    /// The options present but never read, sorted.
    pub fn unused(&self) -> Vec<String> {
        let read = self.read.borrow();
        self.map
            .keys()
            .filter(|k| !read.contains(*k))
            .cloned()
            .collect()
    }
}

/// `ConfigDef.parseType(LIST)`: split on commas, items trimmed; the empty
/// (or blank) text is the empty list.
pub fn split_list(v: &str) -> Vec<String> {
    let t = v.trim();
    if t.is_empty() {
        return Vec::new();
    }
    t.split(',').map(|s| s.trim().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_booleans_and_unused_options_read_as_connect_reads_them() {
        let o: Options = [("a", " x , y,z "), ("b", "TRUE"), ("c", ""), ("d", "1")]
            .into_iter()
            .collect();
        let r = o.reader();
        assert_eq!(r.list("a", None).unwrap(), ["x", "y", "z"]);
        assert!(r.boolean("b", false).unwrap());
        assert!(r.list("c", None).unwrap().is_empty());
        assert!(r.list("e", None).is_err());
        assert_eq!(r.unused(), ["d"]);
        assert!(r.int("d", None).unwrap() == 1);
        assert!(r.unused().is_empty());
        let bad: Options = [("b", "yes")].into_iter().collect();
        assert!(bad.reader().boolean("b", false).is_err());
    }
}
