//! Kafka's `field.syntax.version` and `SingleFieldPath` (KIP-821): a
//! field name (`V1`) or a dotted path into nested structs and maps (`V2`,
//! backticks around a step that holds dots, a backslash before a backtick
//! that ends no step), and how a path finds a field of a schema and a
//! value of a struct or a schemaless map. Pure.

use super::field_support::{java_failure, lookup_field};
use crate::connect::transforms::options::{Reader, TransformConfigError};
use crate::connect::transforms::util::{
    field_value, map_get, require_map, require_struct, struct_get,
};
use crate::connect::transforms::TransformError;
use crate::connect::{Field, Schema, Value};

/// The option naming the syntax.
pub(super) const SYNTAX_OPTION: &str = "field.syntax.version";

/// `FieldSyntaxVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syntax {
    /// A plain field name at the root.
    V1,
    /// Dotted paths.
    V2,
}

/// Reads `field.syntax.version` (default `V1`, any case).
pub(super) fn read_syntax(opts: &Reader<'_>) -> Result<Syntax, TransformConfigError> {
    let v = opts.string(SYNTAX_OPTION, Some("V1"))?;
    match v.to_uppercase().as_str() {
        "V1" => Ok(Syntax::V1),
        "V2" => Ok(Syntax::V2),
        // CaseInsensitiveValidString lists its HashSet: V1 then V2.
        _ => Err(TransformConfigError::invalid(
            SYNTAX_OPTION,
            &v,
            "String must be one of (case insensitive): V1, V2",
        )),
    }
}

/// A parsed `SingleFieldPath`: its steps (none only for an empty `V2`
/// path, which Kafka accepts and then fails on when used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldPath {
    steps: Vec<String>,
}

impl FieldPath {
    /// Parses `text` in `syntax`; `Err` holds the `ConfigException` message
    /// of an unpaired backtick.
    pub(super) fn parse(text: &str, syntax: Syntax) -> Result<FieldPath, String> {
        let steps = match syntax {
            Syntax::V1 => vec![text.to_owned()],
            Syntax::V2 => parse_v2(text)?,
        };
        Ok(FieldPath { steps })
    }

    /// The steps.
    #[cfg(test)]
    pub(super) fn steps(&self) -> &[String] {
        &self.steps
    }

    /// The steps but the last, and the last (`steps.subList(0, n - 1)`
    /// fails on an empty path with an `IllegalArgumentException`).
    fn split(&self) -> Result<(&[String], &str), TransformError> {
        match self.steps.split_last() {
            Some((last, init)) => Ok((init, last.as_str())),
            None => Err(java_failure(
                "fromIndex(0) > toIndex(-1)",
                "an IllegalArgumentException",
            )),
        }
    }

    /// `fieldFrom(schema)`: the field at the path, `None` when a step is
    /// missing.
    pub(super) fn field_from<'a>(
        &self,
        schema: &'a Schema,
    ) -> Result<Option<&'a Field>, TransformError> {
        let (init, last) = self.split()?;
        let mut current = schema;
        for step in init {
            match lookup_field(current, step)? {
                Some((_, f)) => current = &f.schema,
                None => return Ok(None),
            }
        }
        Ok(lookup_field(current, last)?.map(|(_, f)| f))
    }

    /// `valueFrom(struct, withDefault)`: null when a step is missing or a
    /// nested struct is null; intermediate steps always read defaults.
    pub(super) fn value_from_struct(
        &self,
        schema: &Schema,
        values: &[Value],
        with_default: bool,
    ) -> Result<Value, TransformError> {
        let (init, last) = self.split()?;
        let (mut schema, mut values) = (schema, values);
        for step in init {
            let Some((i, f)) = lookup_field(schema, step)? else {
                return Ok(Value::Null);
            };
            let nested = struct_get(schema, values, i);
            if nested.is_null() {
                return Ok(Value::Null);
            }
            values = require_struct(nested, "nested field access")?;
            schema = &f.schema;
        }
        match lookup_field(schema, last)? {
            Some((i, _)) => Ok(field_value(schema, values, i, with_default).clone()),
            None => Ok(Value::Null),
        }
    }

    /// `valueFrom(map)`: null when a step is missing or a nested map is
    /// null.
    pub(super) fn value_from_map(
        &self,
        entries: &[(Value, Value)],
    ) -> Result<Value, TransformError> {
        let (init, last) = self.split()?;
        let mut current = entries;
        for step in init {
            let next = map_get(current, step);
            if next.is_null() {
                return Ok(Value::Null);
            }
            current = require_map(next, "nested field access")?;
        }
        Ok(map_get(current, last).clone())
    }
}

/// `buildFieldPathV2`: steps split at dots; a step opened by a backtick
/// runs to the next backtick that ends the path or is followed by a dot
/// and not preceded by a backslash (an escaped one followed by a dot
/// keeps the backtick, dropping the backslash; a backtick followed by
/// anything else stays as it is); a trailing dot adds an empty step.
fn parse_v2(path: &str) -> Result<Vec<String>, String> {
    let b = path.as_bytes();
    let mut steps = Vec::new();
    let mut idx = 0usize;
    while idx < b.len() {
        if b[idx] == b'`' {
            let (step, next) = backtick_step(path, idx)?;
            steps.push(step);
            idx = next;
        } else {
            match path[idx..].find('.') {
                Some(off) => {
                    steps.push(path[idx..idx + off].to_owned());
                    idx += off + 1;
                }
                None => {
                    steps.push(path[idx..].to_owned());
                    break;
                }
            }
        }
    }
    if path.ends_with('.') {
        steps.push(String::new());
    }
    Ok(steps)
}

/// One backtick-quoted step starting at `open` (the backtick): the step
/// and the index after it (and after its dot).
fn backtick_step(path: &str, open: usize) -> Result<(String, usize), String> {
    let b = path.as_bytes();
    let mut field = String::new();
    let mut start = open + 1;
    let mut idx = open + 1;
    loop {
        let Some(off) = path[idx..].find('`') else {
            return Err(incomplete_pair(path, open));
        };
        idx += off;
        let escaped = b[idx - 1] == b'\\';
        if idx + 1 >= b.len() {
            if escaped {
                return Err(incomplete_pair(path, open));
            }
            field.push_str(&path[start..idx]);
            return Ok((field, idx + 1));
        }
        if b[idx + 1] != b'.' {
            idx += 1;
            continue;
        }
        if escaped {
            field.push_str(&path[start..idx - 1]);
            field.push('`');
            idx += 1;
            start = idx;
            continue;
        }
        field.push_str(&path[start..idx]);
        return Ok((field, idx + 2));
    }
}

/// `failWhenIncompleteBacktickPair`'s message; the position counts UTF-16
/// units, as Java's `String` index does.
fn incomplete_pair(path: &str, open: usize) -> String {
    let position = path[..open].encode_utf16().count();
    format!(
        "Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at position {position} to escape it"
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::connect::transforms::options::Options;
    use crate::connect::Type;

    /// The steps of a `V2` path.
    fn v2(p: &str) -> Vec<String> {
        FieldPath::parse(p, Syntax::V2).unwrap().steps().to_vec()
    }

    #[test]
    fn v2_paths_split_as_kafka_splits_them() {
        assert_eq!(v2("foo.bar"), ["foo", "bar"]);
        assert_eq!(v2("`foo.bar`.baz"), ["foo.bar", "baz"]);
        // A backtick not followed by a dot stays in the step.
        assert_eq!(v2("`foo`bar`.baz"), ["foo`bar", "baz"]);
        // An escaped backtick before a dot: the backslash goes.
        assert_eq!(v2("`foo\\`.bar`"), ["foo`.bar"]);
        assert_eq!(v2("foo."), ["foo", ""]);
        assert_eq!(v2(".a"), ["", "a"]);
        assert_eq!(v2("a..b"), ["a", "", "b"]);
        assert_eq!(v2("a.`b.c`."), ["a", "b.c", ""]);
        assert!(v2("").is_empty());
        assert_eq!(
            FieldPath::parse("a.b", Syntax::V1).unwrap().steps(),
            ["a.b"]
        );
    }

    #[test]
    fn unpaired_backticks_are_config_errors() {
        let e = |p: &str| FieldPath::parse(p, Syntax::V2).unwrap_err();
        assert_eq!(
            e("`foo"),
            "Incomplete backtick pair in path: [`foo], consider adding a backslash before backtick at position 0 to escape it"
        );
        assert!(e("a.`b`c.d").contains("at position 2 to"));
        assert!(e("`a\\`").contains("at position 0 to"));
        // UTF-16 positions.
        assert!(e("é.\u{1F600}.`x").contains("at position 5 to"));
    }

    #[test]
    fn syntax_option_is_case_insensitive() {
        let o: Options = [("field.syntax.version", "v2")].into_iter().collect();
        assert_eq!(read_syntax(&o.reader()).unwrap(), Syntax::V2);
        assert_eq!(
            read_syntax(&Options::default().reader()).unwrap(),
            Syntax::V1
        );
        let bad: Options = [("field.syntax.version", "V3")].into_iter().collect();
        assert_eq!(
            read_syntax(&bad.reader()).unwrap_err(),
            TransformConfigError::invalid(
                "field.syntax.version",
                "V3",
                "String must be one of (case insensitive): V1, V2"
            )
        );
    }

    /// A struct with an optional struct `a` {`b`} and a string `s`.
    fn nested() -> Schema {
        let inner = Schema::structure(
            None,
            vec![Field {
                name: Arc::from("b"),
                schema: Arc::new(Schema::optional(Type::Int32)),
            }],
        )
        .with_optional(true);
        Schema::structure(
            None,
            vec![
                Field {
                    name: Arc::from("a"),
                    schema: Arc::new(inner),
                },
                Field {
                    name: Arc::from("s"),
                    schema: Arc::new(Schema::new(Type::String)),
                },
            ],
        )
    }

    #[test]
    fn paths_find_fields_and_values() {
        let s = nested();
        let p = FieldPath::parse("a.b", Syntax::V2).unwrap();
        assert_eq!(&*p.field_from(&s).unwrap().unwrap().name, "b");
        let v = [Value::Struct(vec![Value::Int32(4)]), Value::string("x")];
        assert_eq!(p.value_from_struct(&s, &v, true).unwrap(), Value::Int32(4));
        let null_inner = [Value::Null, Value::string("x")];
        assert_eq!(
            p.value_from_struct(&s, &null_inner, true).unwrap(),
            Value::Null
        );
        let missing = FieldPath::parse("z.b", Syntax::V2).unwrap();
        assert_eq!(missing.field_from(&s).unwrap(), None);
        assert_eq!(
            missing.value_from_struct(&s, &v, true).unwrap(),
            Value::Null
        );
        // A step through a string: fieldFrom looks up fields on a STRING.
        let through = FieldPath::parse("s.x", Syntax::V2).unwrap();
        assert_eq!(
            through.field_from(&s).unwrap_err().message,
            "Cannot look up fields on non-struct type"
        );
        let empty = FieldPath::parse("", Syntax::V2).unwrap();
        assert!(empty
            .field_from(&s)
            .unwrap_err()
            .message
            .starts_with("fromIndex(0) > toIndex(-1)"));
    }

    #[test]
    fn paths_into_maps() {
        let m = vec![
            (
                Value::string("a"),
                Value::Map(vec![(Value::string("b"), Value::Int64(1))]),
            ),
            (Value::string("s"), Value::string("t")),
        ];
        let p = FieldPath::parse("a.b", Syntax::V2).unwrap();
        assert_eq!(p.value_from_map(&m).unwrap(), Value::Int64(1));
        let q = FieldPath::parse("s.b", Syntax::V2).unwrap();
        assert_eq!(
            q.value_from_map(&m).unwrap_err().message,
            "Only Map objects supported in absence of schema for [nested field access], found: java.lang.String"
        );
        let r = FieldPath::parse("x.b", Syntax::V2).unwrap();
        assert_eq!(r.value_from_map(&m).unwrap(), Value::Null);
    }
}
