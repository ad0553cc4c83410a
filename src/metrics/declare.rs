//! `declare_metrics!`: a struct whose fields are the families that groups
//! of declarations name, each family declared once.
//!
//! A declaration holds everything there is to say about one family:
//!
//! ```text
//! /// Commit to Kafka acknowledgement latency, seconds.
//! COMMIT_TO_ACK commit_to_ack: Histogram {
//!     name: "walrelay_commit_to_ack_seconds",
//!     help: "Seconds from source commit to Kafka acknowledgement",
//!     // 0.5 ms .. ~65 s
//!     buckets: exponential_buckets(0.0005, 2.0, 18),
//! }
//! ```
//!
//! From it come a `pub const COMMIT_TO_ACK: &str` with the name, a field
//! `pub commit_to_ack: Histogram`, both with the doc comment, and the
//! field's registration under that name and help text. The type says the
//! kind (a `Counter`, a `Gauge`, a `Histogram`, a `Family` of one of them,
//! or [`super::Stages`]); `buckets` is given for histograms only (the
//! type's `new` takes them) and everything else starts at
//! `Default::default()`. `scripts/check-deploy.sh` reads the same lines
//! for the names and kinds of what walrelay exports.
//!
//! Declarations come in groups, one per stage that emits them, each a
//! macro in its own file (`metrics/sink.rs` has `sink_metrics!`) that
//! hands its declarations on and calls back, so that one struct collects
//! every group's fields although `macro_rules!` cannot read another file:
//!
//! ```text
//! declare_metrics! {
//!     /// doc
//!     pub struct Metrics {
//!         name: String,                 // other fields: Default at first
//!     }
//!     with wal_metrics, sink_metrics    // the groups, in exposition order
//! }
//! ```
//!
//! The struct gets `new_registered(&mut Registry)`: every family at zero,
//! registered in the order of the groups and of the declarations in each
//! (the order of the exposition), every other field at its default. The
//! declarations are Rust tokens read where `declare_metrics!` is invoked
//! (`metrics.rs`): the types and functions they name resolve there.

/// See the module's documentation.
macro_rules! declare_metrics {
    // The struct, then the groups that declare its families.
    (
        $(#[$meta:meta])*
        $vis:vis struct $Struct:ident $fields:tt
        with $($group:ident),+ $(,)?
    ) => {
        declare_metrics! { @next [$(#[$meta])* $vis struct $Struct $fields] [] $($group)+ }
    };
    // A group hands over its declarations (its macro calls this rule).
    (@append [$($new:tt)*] $head:tt [$($declared:tt)*] $($groups:ident)*) => {
        declare_metrics! { @next $head [$($declared)* $($new)*] $($groups)* }
    };
    // The next group's turn.
    (@next $head:tt $declared:tt $group:ident $($groups:ident)*) => {
        $group! { $head $declared $($groups)* }
    };
    // Every group read: the names, the struct and its registration.
    (
        @next [
            $(#[$meta:meta])*
            $vis:vis struct $Struct:ident {
                $($(#[$field_meta:meta])* $field_vis:vis $plain:ident: $plain_ty:ty,)*
            }
        ] [$(
            $(#[$doc:meta])*
            $NAME:ident $family:ident: $ty:ty {
                name: $name:literal,
                help: $help:literal
                $(, buckets: $buckets:expr)?
                $(,)?
            }
        )*]
    ) => {
        $(
            $(#[$doc])*
            pub const $NAME: &str = $name;
        )*

        $(#[$meta])*
        $vis struct $Struct {
            $($(#[$field_meta])* $field_vis $plain: $plain_ty,)*
            $(
                $(#[$doc])*
                pub $family: $ty,
            )*
        }

        impl $Struct {
            /// Every family at zero, registered in `registry` in the order
            /// of the declarations; every other field at its default.
            fn new_registered(registry: &mut Registry) -> $Struct {
                let m = $Struct {
                    $($plain: Default::default(),)*
                    $($family: declare_metrics!(@new $ty $(, $buckets)?),)*
                };
                $(registry.register($NAME, $help, m.$family.clone());)*
                m
            }
        }
    };
    (@new $ty:ty) => { <$ty>::default() };
    (@new $ty:ty, $buckets:expr) => { <$ty>::new($buckets) };
}
