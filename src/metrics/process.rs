//! The families of a pipeline's life (`pipeline`, and [`super::Metrics`]
//! itself for `walrelay_pipeline_up` and `walrelay_ready`) and those of
//! the process, which alone carry no `pipeline` label.
//!
//! Declarations for `declare_metrics!` (`metrics/declare.rs`), which
//! reads them in `metrics.rs`.

macro_rules! pipeline_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// 1 while the pipeline runs, 0 once it stopped on a fatal error (the
            /// process keeps its other pipelines running).
            PIPELINE_UP pipeline_up: Gauge {
                name: "walrelay_pipeline_up",
                help: "1 while the pipeline runs, 0 once it stopped on a fatal error",
            }
            /// 1 while ready (streaming, Kafka reachable, lag below critical).
            READY ready: Gauge {
                name: "walrelay_ready",
                help: "1 while the pipeline streams (or holds a shard), Kafka is reachable and lag is below critical",
            }
            /// Which source the pipeline reads: `{kind="wal"}` or `{kind="poll"}`, 1.
            SOURCE_INFO source_info: Family<KindLabel, Gauge> {
                name: "walrelay_source_info",
                help: "Which source the pipeline reads (kind: wal or poll), 1",
            }
            /// Replication sessions re-established after a transient failure (`walrelay_reconnects_total`).
            RECONNECTS reconnects: Counter {
                name: "walrelay_reconnects",
                help: "Replication sessions re-established after a transient failure",
            }
        ] $($chain)* }
    };
}

macro_rules! process_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// Build information (`version` label), always 1.
            BUILD_INFO build_info: Family<VersionLabel, Gauge> {
                name: "walrelay_build_info",
                help: "Build information",
            }
            /// 1 while the process runs.
            UP up: Gauge {
                name: "walrelay_up",
                help: "1 while walrelay runs",
            }
        ] $($chain)* }
    };
}
