//! `MaskField$Key` / `MaskField$Value`: the listed fields replaced by the
//! "empty" value of their Java class (0, false, "", an empty list or map,
//! `BigDecimal.ZERO`, the epoch `Date`) or by the `replacement` text
//! converted to that class (`Values.convertTo*`, `new BigDecimal`), with
//! Kafka 4.1.1's messages for the classes it cannot mask. Pure.

use std::sync::Arc;

use super::field_support::struct_fields;
use crate::connect::java::parse_big_decimal;
use crate::connect::transforms::options::{Reader, TransformConfigError};
use crate::connect::transforms::util::{
    class_name_under, copy_capacity, field_value, java_hash_map, java_hash_set_order, map_get,
    require_map, require_struct, validate_value,
};
use crate::connect::transforms::{ConnectRecord, Side, TransformError, Transformation};
use crate::connect::{Decimal, Schema, Value};

/// `MaskField`'s purpose in messages.
const PURPOSE: &str = "mask fields";

/// A configured `MaskField`.
#[derive(Debug)]
pub(super) struct MaskField {
    /// `$Key` or `$Value`.
    side: Side,
    /// `fields`, in the iteration order of Kafka's `HashSet`.
    fields: Vec<String>,
    /// `replacement`.
    replacement: Option<String>,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl MaskField {
    /// Reads `fields` (required, non-empty), `replacement` (non-empty when
    /// set) and `replace.null.with.default` (true).
    pub(super) fn configure(
        side: Side,
        opts: &Reader<'_>,
    ) -> Result<MaskField, TransformConfigError> {
        let fields = opts.list("fields", None)?;
        if fields.is_empty() {
            return Err(TransformConfigError::invalid("fields", "[]", "Empty list"));
        }
        let replacement = opts.string_or_null("replacement");
        if replacement.as_deref() == Some("") {
            return Err(TransformConfigError::invalid(
                "replacement",
                "",
                "String must be non-empty",
            ));
        }
        Ok(MaskField {
            side,
            fields: java_hash_set_order(&fields),
            replacement,
            replace_null_with_default: opts.boolean("replace.null.with.default", true)?,
        })
    }

    /// `masked(value)` for a value Connect holds under `schema`.
    fn masked(&self, schema: Option<&Schema>, value: &Value) -> Result<Value, TransformError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        match &self.replacement {
            None => mask_with_empty(schema, value),
            Some(r) => mask_with_replacement(schema, value, r),
        }
    }

    /// `applySchemaless`: a copy of the map with every listed field put,
    /// masked (a field the map lacks is put as null).
    fn apply_schemaless(&self, value: &Value) -> Result<Value, TransformError> {
        let entries = require_map(value, PURPOSE)?;
        let mut out: Vec<(Value, Value)> = entries.to_vec();
        for f in &self.fields {
            let m = self.masked(None, map_get(entries, f))?;
            out.push((Value::string(f.as_str()), m));
        }
        java_hash_map(out, copy_capacity(entries.len())).map(Value::Map)
    }

    /// `applyWithSchema`: the struct, same schema, listed fields masked.
    fn apply_with_schema(&self, schema: &Schema, value: &Value) -> Result<Value, TransformError> {
        let values = require_struct(value, PURPOSE)?;
        let fields = struct_fields(schema)?;
        let mut out = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            let orig = field_value(schema, values, i, self.replace_null_with_default).clone();
            let v = if self.fields.iter().any(|m| *m == *f.name) {
                self.masked(Some(&f.schema), &orig)?
            } else {
                orig
            };
            validate_value(Some(&f.name), &f.schema, &v)?;
            out.push(v);
        }
        Ok(Value::Struct(out))
    }
}

impl Transformation for MaskField {
    /// No null check: a null key or value fails `requireMap`/`requireStruct`.
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let schema: Option<Arc<Schema>> = self.side.schema(&record).cloned();
        let updated = match &schema {
            None => self.apply_schemaless(self.side.value(&record))?,
            Some(s) => self.apply_with_schema(s, self.side.value(&record))?,
        };
        self.side.set(&mut record, schema, updated);
        Ok(Some(record))
    }
}

/// `maskWithNullValue`: the empty value of the value's class.
fn mask_with_empty(schema: Option<&Schema>, value: &Value) -> Result<Value, TransformError> {
    Ok(match value {
        Value::Boolean(_) => Value::Boolean(false),
        Value::Int8(_) => Value::Int8(0),
        Value::Int16(_) => Value::Int16(0),
        // A Date, Time or Timestamp becomes `new Date(0)`: still 0.
        Value::Int32(_) => Value::Int32(0),
        Value::Int64(_) => Value::Int64(0),
        Value::Float32(_) => Value::Float32(0.0),
        Value::Float64(_) => Value::Float64(0.0),
        Value::Decimal(_) => Value::Decimal(zero()),
        Value::String(_) => Value::string(""),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::Map(_) => Value::Map(Vec::new()),
        Value::Null | Value::Bytes(_) | Value::Struct(_) => {
            return Err(TransformError::new(format!(
                "Cannot mask value of type: class {}",
                class_name_under(schema, value)
            )))
        }
    })
}

/// `BigDecimal.ZERO`.
fn zero() -> Decimal {
    Decimal {
        negative: false,
        digits: "0".into(),
        scale: 0,
    }
}

/// `maskWithCustomReplacement`: the replacement converted to the value's
/// class (numbers through `BigDecimal`), for the classes Kafka maps.
fn mask_with_replacement(
    schema: Option<&Schema>,
    value: &Value,
    r: &str,
) -> Result<Value, TransformError> {
    let class = class_name_under(schema, value);
    if class == "java.util.Date" {
        return Err(cannot_replace(class));
    }
    let not_a_number = || {
        TransformError::new(format!(
            "Unable to convert {r} (class java.lang.String) to a number"
        ))
    };
    #[allow(clippy::cast_possible_truncation)]
    Ok(match value {
        Value::Int8(_) => Value::Int8(as_long(r).ok_or_else(not_a_number)? as i8),
        Value::Int16(_) => Value::Int16(as_long(r).ok_or_else(not_a_number)? as i16),
        Value::Int32(_) => Value::Int32(as_long(r).ok_or_else(not_a_number)? as i32),
        Value::Int64(_) => Value::Int64(as_long(r).ok_or_else(not_a_number)?),
        Value::Float32(_) => Value::Float32(as_double(r).ok_or_else(not_a_number)? as f32),
        Value::Float64(_) => Value::Float64(as_double(r).ok_or_else(not_a_number)?),
        Value::String(_) => Value::string(r),
        Value::Decimal(_) => Value::Decimal(parse_big_decimal(r).ok_or_else(|| {
            // The NumberFormatException MaskField itself catches.
            TransformError::new(format!(
                "Unable to convert {r} (class java.lang.String) to number"
            ))
        })?),
        _ => return Err(cannot_replace(class)),
    })
}

/// The message for a class without a replacement mapping.
fn cannot_replace(class: &str) -> TransformError {
    TransformError::new(format!(
        "Cannot mask value of type class {class} with custom replacement."
    ))
}

/// `new BigDecimal(text).longValue()`: the fraction dropped, the low 64
/// bits of the integer kept.
pub(super) fn as_long(text: &str) -> Option<i64> {
    let d = parse_big_decimal(text)?;
    let digits = d.digits.as_bytes();
    let kept = if d.scale > 0 {
        let drop = usize::try_from(d.scale).unwrap_or(usize::MAX);
        &digits[..digits.len().saturating_sub(drop)]
    } else {
        digits
    };
    let mut acc: u64 = 0;
    for b in kept {
        acc = acc.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
    }
    // 10^64 is a multiple of 2^64: more zeros change nothing.
    let zeros = if d.scale < 0 {
        (-i64::from(d.scale)).min(64)
    } else {
        0
    };
    for _ in 0..zeros {
        acc = acc.wrapping_mul(10);
    }
    #[allow(clippy::cast_possible_wrap)]
    let v = acc as i64;
    Some(if d.negative { v.wrapping_neg() } else { v })
}

/// `new BigDecimal(text).doubleValue()`: correctly rounded.
pub(super) fn as_double(text: &str) -> Option<f64> {
    let d = parse_big_decimal(text)?;
    let sign = if d.negative { "-" } else { "" };
    let v: f64 = format!("{sign}{}e{}", d.digits, -i64::from(d.scale))
        .parse()
        .ok()?;
    // BigDecimal zero has no sign.
    Some(if v == 0.0 { 0.0 } else { v })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{apply, config_err, fail, map, record, s, structure, t};
    use super::*;
    use crate::connect::Type;

    /// `MaskField$Value`.
    const MASK_V: &str = "org.apache.kafka.connect.transforms.MaskField$Value";
    /// `MaskField$Key`.
    const MASK_K: &str = "org.apache.kafka.connect.transforms.MaskField$Key";

    /// A `BigDecimal`.
    fn dec(negative: bool, digits: &str, scale: i32) -> Decimal {
        Decimal {
            negative,
            digits: digits.into(),
            scale,
        }
    }

    /// One field of each maskable type.
    fn typed() -> (Schema, Value) {
        let decimal = Schema::new(Type::Bytes)
            .named("org.apache.kafka.connect.data.Decimal", Some(1))
            .with_parameter("scale", "2");
        let date = Schema::new(Type::Int32).named("org.apache.kafka.connect.data.Date", Some(1));
        let ts = Schema::new(Type::Int64).named("org.apache.kafka.connect.data.Timestamp", Some(1));
        let list = Schema::array(Arc::new(Schema::new(Type::String)));
        let mut m = Schema::new(Type::Map);
        m.key_schema = Some(Arc::new(Schema::new(Type::String)));
        m.value_schema = Some(Arc::new(Schema::new(Type::Int32)));
        let schema = structure(vec![
            ("b", Schema::new(Type::Boolean)),
            ("i8", Schema::new(Type::Int8)),
            ("i16", Schema::new(Type::Int16)),
            ("i32", Schema::new(Type::Int32)),
            ("i64", Schema::new(Type::Int64)),
            ("f32", Schema::new(Type::Float32)),
            ("f64", Schema::new(Type::Float64)),
            ("s", Schema::new(Type::String)),
            ("d", decimal),
            ("date", date),
            ("ts", ts),
            ("list", list),
            ("map", m),
            ("opt", Schema::optional(Type::String)),
        ]);
        let value = Value::Struct(vec![
            Value::Boolean(true),
            Value::Int8(-3),
            Value::Int16(300),
            Value::Int32(70_000),
            Value::Int64(1 << 40),
            Value::Float32(1.5),
            Value::Float64(-2.25),
            s("secret"),
            Value::Decimal(dec(false, "1234", 2)),
            Value::Int32(19_000),
            Value::Int64(1_700_000_000_000),
            Value::Array(vec![s("a")]),
            Value::Map(vec![(s("k"), Value::Int32(1))]),
            Value::Null,
        ]);
        (schema, value)
    }

    /// Every field of [`typed`].
    const ALL: &str = "b,i8,i16,i32,i64,f32,f64,s,d,date,ts,list,map,opt";

    #[test]
    fn masks_each_type_with_its_empty_value() {
        let (schema, value) = typed();
        let tr = t(MASK_V, &[("fields", ALL)]);
        let out = apply(&*tr, record(None, Value::Null, Some(schema.clone()), value));
        assert_eq!(out.value_schema.as_deref(), Some(&schema));
        assert_eq!(
            out.value,
            Value::Struct(vec![
                Value::Boolean(false),
                Value::Int8(0),
                Value::Int16(0),
                Value::Int32(0),
                Value::Int64(0),
                Value::Float32(0.0),
                Value::Float64(0.0),
                s(""),
                // BigDecimal.ZERO: scale 0, whatever the schema's.
                Value::Decimal(dec(false, "0", 0)),
                Value::Int32(0),
                Value::Int64(0),
                Value::Array(Vec::new()),
                Value::Map(Vec::new()),
                Value::Null,
            ])
        );
    }

    #[test]
    fn masks_with_a_replacement_converted_to_the_class() {
        let (schema, value) = typed();
        let numbers = "i8,i16,i32,i64,f32,f64,s,d";
        let tr = t(MASK_V, &[("fields", numbers), ("replacement", "300.9")]);
        let out = apply(
            &*tr,
            record(None, Value::Null, Some(schema.clone()), value.clone()),
        );
        let Value::Struct(v) = out.value else {
            panic!()
        };
        // (byte) 300 = 44: BigDecimal.longValue() then a narrowing cast.
        assert_eq!(v[1], Value::Int8(44));
        assert_eq!(v[2], Value::Int16(300));
        assert_eq!(v[3], Value::Int32(300));
        assert_eq!(v[4], Value::Int64(300));
        assert_eq!(v[5], Value::Float32(300.9));
        assert_eq!(v[6], Value::Float64(300.9));
        assert_eq!(v[7], s("300.9"));
        assert_eq!(v[8], Value::Decimal(dec(false, "3009", 1)));
        assert_eq!(v[0], Value::Boolean(true));
        let bad = t(MASK_V, &[("fields", "i32"), ("replacement", "abc")]);
        assert_eq!(
            fail(
                &*bad,
                record(None, Value::Null, Some(schema.clone()), value.clone())
            ),
            "Unable to convert abc (class java.lang.String) to a number"
        );
        let bad_dec = t(MASK_V, &[("fields", "d"), ("replacement", "abc")]);
        assert_eq!(
            fail(
                &*bad_dec,
                record(None, Value::Null, Some(schema.clone()), value.clone())
            ),
            "Unable to convert abc (class java.lang.String) to number"
        );
        for (field, class) in [
            ("b", "java.lang.Boolean"),
            ("date", "java.util.Date"),
            ("ts", "java.util.Date"),
            ("list", "java.util.ArrayList"),
        ] {
            let tr = t(MASK_V, &[("fields", field), ("replacement", "1")]);
            assert_eq!(
                fail(
                    &*tr,
                    record(None, Value::Null, Some(schema.clone()), value.clone())
                ),
                format!("Cannot mask value of type class {class} with custom replacement.")
            );
        }
    }

    #[test]
    fn refuses_bytes_and_structs_and_nulls_in_required_fields() {
        let schema = structure(vec![
            ("raw", Schema::new(Type::Bytes)),
            (
                "inner",
                structure(vec![("x", Schema::optional(Type::Int32))]),
            ),
        ]);
        let value = Value::Struct(vec![
            Value::Bytes(bytes::Bytes::from_static(b"x")),
            Value::Struct(vec![Value::Null]),
        ]);
        let raw = t(MASK_V, &[("fields", "raw")]);
        assert_eq!(
            fail(
                &*raw,
                record(None, Value::Null, Some(schema.clone()), value.clone())
            ),
            "Cannot mask value of type: class [B"
        );
        let inner = t(MASK_V, &[("fields", "inner")]);
        assert_eq!(
            fail(
                &*inner,
                record(None, Value::Null, Some(schema.clone()), value)
            ),
            "Cannot mask value of type: class org.apache.kafka.connect.data.Struct"
        );
        // No null check: tombstones fail.
        assert_eq!(
            fail(&*raw, record(None, Value::Null, Some(schema), Value::Null)),
            "Only Struct objects supported for [mask fields], found: null"
        );
        assert_eq!(
            fail(&*raw, record(None, Value::Null, None, Value::Null)),
            "Only Map objects supported in absence of schema for [mask fields], found: null"
        );
    }

    #[test]
    fn defaults_are_masked_unless_disabled() {
        let mut q = Schema::new(Type::Int32);
        q.default = Some(Value::Int32(7));
        let schema = structure(vec![("q", q)]);
        let v = Value::Struct(vec![Value::Null]);
        let tr = t(MASK_V, &[("fields", "q"), ("replacement", "5")]);
        let out = apply(
            &*tr,
            record(None, Value::Null, Some(schema.clone()), v.clone()),
        );
        assert_eq!(out.value, Value::Struct(vec![Value::Int32(5)]));
        let raw = t(
            MASK_V,
            &[("fields", "q"), ("replace.null.with.default", "false")],
        );
        assert_eq!(
            fail(&*raw, record(None, Value::Null, Some(schema), v)),
            "Invalid value: null used for required field: \"q\", schema type: INT32"
        );
    }

    #[test]
    fn schemaless_masks_put_every_listed_field() {
        let tr = t(MASK_V, &[("fields", "name,n,missing")]);
        let v = map(&[
            ("id", Value::Int32(1)),
            ("name", s("n")),
            ("n", Value::Int64(5)),
        ]);
        // A copy of 3 entries (4 buckets) grows to 8 with `missing`.
        assert_eq!(
            apply(&*tr, record(None, Value::Null, None, v)).value,
            map(&[
                ("name", s("")),
                ("missing", Value::Null),
                ("id", Value::Int32(1)),
                ("n", Value::Int64(0)),
            ])
        );
        let k = t(MASK_K, &[("fields", "id"), ("replacement", "-7")]);
        let out = apply(
            &*k,
            record(None, map(&[("id", Value::Int32(1))]), None, s("v")),
        );
        assert_eq!(out.key, map(&[("id", Value::Int32(-7))]));
        assert_eq!(out.value, s("v"));
    }

    #[test]
    fn options() {
        assert_eq!(
            config_err(MASK_V, &[]),
            TransformConfigError::Missing {
                key: "fields".into()
            }
        );
        assert_eq!(
            config_err(MASK_V, &[("fields", "")]),
            TransformConfigError::invalid("fields", "[]", "Empty list")
        );
        assert_eq!(
            config_err(MASK_V, &[("fields", "a"), ("replacement", " ")]),
            TransformConfigError::invalid("replacement", "", "String must be non-empty")
        );
    }

    #[test]
    fn big_decimal_text() {
        assert_eq!(parse_big_decimal("1E+3"), Some(dec(false, "1", -3)));
        assert_eq!(parse_big_decimal("-0.000"), Some(dec(false, "0", 3)));
        assert_eq!(parse_big_decimal("+.50"), Some(dec(false, "50", 2)));
        assert_eq!(parse_big_decimal("-007.e1"), Some(dec(true, "7", -1)));
        for bad in [
            ".",
            "",
            "-",
            "1e",
            "1e+",
            "1.2.3",
            "1e5.0",
            " 1",
            "0x10",
            "1e2147483648",
            "1e-2147483648",
        ] {
            assert_eq!(parse_big_decimal(bad), None, "{bad}");
        }
        assert_eq!(
            parse_big_decimal("1e-2147483647").map(|d| d.scale),
            Some(i32::MAX)
        );
        assert_eq!(
            parse_big_decimal("1e00000000000002").map(|d| d.scale),
            Some(-2)
        );
        assert_eq!(as_long("-1.9"), Some(-1));
        assert_eq!(as_long("0.99"), Some(0));
        assert_eq!(as_long("1e20"), Some(7_766_279_631_452_241_920));
        assert_eq!(as_long("1e64"), Some(0));
        assert_eq!(as_long("-9223372036854775809"), Some(i64::MAX));
        assert_eq!(as_double("1e400"), Some(f64::INFINITY));
        assert_eq!(as_double("-0").map(f64::is_sign_negative), Some(false));
        // (float) of the double, not a direct float parse: double rounding.
        #[allow(clippy::cast_possible_truncation)]
        let f = as_double("1.00000017881393432617187499").map(|d| d as f32);
        assert_eq!(f.map(f32::to_bits), Some(0x3f80_0002));
    }
}
