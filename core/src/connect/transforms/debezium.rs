//! Debezium's transforms that apply to outbox records after the router:
//! `HeaderToValue`, `PartitionRouting`, `EnforceRecordSize`,
//! `ActivateTracingSpan` (to be written).

use super::options::Reader;
use super::Built;

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let _ = (class, opts);
    None
}
