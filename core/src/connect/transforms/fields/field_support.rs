//! What the field transforms of `fields.rs` share beyond `util.rs`: the
//! checks `Schema.fields`/`Schema.field` and `SchemaBuilder.field` make,
//! and how a Java exception other than `DataException` is reported. Pure.

use std::sync::Arc;

use crate::connect::transforms::TransformError;
use crate::connect::{Field, Schema, Type};

/// `DataException` of a Java exception other than `DataException`: the
/// message with a note of which exception Connect fails with.
pub(super) fn java_failure(message: &str, exception: &str) -> TransformError {
    TransformError::new(format!(
        "{message} (Kafka Connect fails with {exception} here)"
    ))
}

/// `schema.fields()`: `DataException` on a schema that is not a struct.
pub(super) fn struct_fields(schema: &Schema) -> Result<&[Field], TransformError> {
    if schema.kind == Type::Struct {
        Ok(&schema.fields)
    } else {
        Err(TransformError::new("Cannot list fields on non-struct type"))
    }
}

/// `schema.field(name)`: `DataException` on a schema that is not a struct.
pub(super) fn lookup_field<'a>(
    schema: &'a Schema,
    name: &str,
) -> Result<Option<(usize, &'a Field)>, TransformError> {
    if schema.kind != Type::Struct {
        return Err(TransformError::new(
            "Cannot look up fields on non-struct type",
        ));
    }
    Ok(schema.field_index(name).map(|i| (i, &schema.fields[i])))
}

/// `SchemaBuilder.field(name, schema)` appended to `builder` (a struct):
/// refuses an empty name and a name already present.
pub(super) fn add_field(
    builder: &mut Schema,
    name: &str,
    schema: Arc<Schema>,
) -> Result<(), TransformError> {
    if name.is_empty() {
        return Err(TransformError::new("fieldName cannot be null."));
    }
    if builder.field_index(name).is_some() {
        return Err(TransformError::new(format!(
            "Cannot create field because of field name duplication {name}"
        )));
    }
    builder.fields.push(Field {
        name: Arc::from(name),
        schema,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_refuses_empty_and_duplicate_names() {
        let mut b = Schema::structure(None, Vec::new());
        let s = Arc::new(Schema::new(Type::String));
        add_field(&mut b, "a", s.clone()).unwrap();
        assert_eq!(
            add_field(&mut b, "a", s.clone()).unwrap_err().message,
            "Cannot create field because of field name duplication a"
        );
        assert_eq!(
            add_field(&mut b, "", s).unwrap_err().message,
            "fieldName cannot be null."
        );
        assert_eq!(
            lookup_field(&Schema::new(Type::String), "a")
                .unwrap_err()
                .message,
            "Cannot look up fields on non-struct type"
        );
    }
}
