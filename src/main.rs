//! The `walrelay` command line: parses the arguments and calls the
//! library's function for the subcommand (`walrelay::cli`). It must never
//! hold logic of its own: loading, running, printing and exit statuses
//! live in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use walrelay::cli::{self, LogFormat, RunOverrides};

/// With the `mimalloc` feature, Rust's allocations go to mimalloc rather
/// than the C library's malloc (see that feature in Cargo.toml).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "walrelay",
    version = cli::version::line(),
    about = "Debezium-compatible transactional outbox relay: PostgreSQL logical replication to Kafka"
)]
struct Cli {
    /// Log format: human-readable text, or one JSON object per line for log
    /// shippers.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    /// Address of the /metrics, /healthz, /readyz and operator's page (/)
    /// listener; overrides the config's `metrics.listen` (default
    /// 127.0.0.1:9187; "" disables it).
    #[arg(long, global = true)]
    metrics_addr: Option<String>,
    /// The listener's web configuration file (TLS, HTTP/2, basic auth), in
    /// the format of Prometheus exporters' --web.config.file (also accepted
    /// under that name); overrides the config's `metrics.web_config_file`.
    /// `connect-standalone` and `connect-distributed` take it only here.
    #[arg(long, global = true, alias = "web.config.file")]
    web_config_file: Option<PathBuf>,
    /// Exit (status 1) as soon as one pipeline stops on a fatal error,
    /// stopping the others gracefully, instead of keeping them running;
    /// overrides `runtime.on_pipeline_failure`.
    #[arg(long, global = true)]
    exit_on_pipeline_failure: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the relay: every pipeline of the configuration.
    Run {
        /// Configuration file: walrelay TOML (one pipeline, or several as
        /// `[[pipelines]]`), or Debezium Server's `application.properties`
        /// (chosen by the `.properties` extension).
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Check, without changing anything, that PostgreSQL and Kafka are ready
    /// for walrelay; prints a pass/fail table per pipeline, exits 1 on any
    /// failure.
    Check {
        /// Configuration file (either form).
        #[arg(long, short)]
        config: PathBuf,
        /// Check only this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
    },
    /// Show a running walrelay's state, read from the `/api/state` of its
    /// metrics listener (`--metrics-addr`, default 127.0.0.1:9187, or a
    /// full http:// or https:// URL of the listener): a section per pipeline, with a
    /// table of them first when there are several. Exits 1 only when the
    /// listener cannot be read (or runs no such --pipeline), whatever
    /// state the pipelines are in.
    Status {
        /// Refresh every SECS seconds until Ctrl-C.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        watch: Option<u64>,
        /// Show only this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
        /// An https:// listener's CA: trust only the certificates (PEM) of
        /// this file instead of the system's. A bare host:port is then read
        /// over https.
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        /// Present this client certificate (PEM) to the listener.
        #[arg(long, value_name = "FILE", requires = "key_file")]
        cert_file: Option<PathBuf>,
        /// The client certificate's private key (PEM).
        #[arg(long, value_name = "FILE", requires = "cert_file")]
        key_file: Option<PathBuf>,
        /// Basic-auth user; the password is read from --password-file or
        /// the environment variable WALRELAY_STATUS_PASSWORD, never from
        /// the command line.
        #[arg(long)]
        user: Option<String>,
        /// File whose first line is the basic-auth password of --user.
        #[arg(long, value_name = "FILE", requires = "user")]
        password_file: Option<PathBuf>,
    },
    /// Publish rows of the polling source's outbox again: set the published
    /// column back to NULL on the published rows that match, so the running
    /// walrelay publishes them once more. Without --yes only counts them.
    /// Needs source.kind = "poll" and poll.on_publish = "mark".
    #[command(group(clap::ArgGroup::new("rows").required(true).args(["condition", "since"])))]
    Replay {
        /// Configuration file (either form).
        #[arg(long, short)]
        config: PathBuf,
        /// The pipeline whose outbox to replay (required when the
        /// configuration has several).
        #[arg(long)]
        pipeline: Option<String>,
        /// The rows to replay, as an SQL condition on the outbox table's
        /// columns, e.g. "aggregatetype = 'order' AND seq > 1000".
        #[arg(long = "where", value_name = "SQL")]
        condition: Option<String>,
        /// The rows published at or after this time (a timestamp PostgreSQL
        /// reads, e.g. "2026-03-01 12:00+00").
        #[arg(long, value_name = "TIMESTAMP")]
        since: Option<String>,
        /// Reset the rows (one transaction); without it nothing is changed.
        #[arg(long)]
        yes: bool,
    },
    /// Validate a configuration file (either form) and exit.
    Validate {
        /// Configuration file.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Run from Kafka Connect standalone files, like `connect-standalone.sh`:
    /// a worker `.properties` file and any number of Debezium PostgreSQL
    /// connector files (`.properties` or REST `.json`, mixed), one pipeline
    /// each.
    ConnectStandalone {
        /// Validate the files, print `ok` and exit instead of running.
        #[arg(long)]
        validate: bool,
        /// The worker file (`connect-standalone.properties`).
        worker: PathBuf,
        /// The connector files, one pipeline each.
        #[arg(required = true)]
        connectors: Vec<PathBuf>,
    },
    /// Run as a Kafka Connect distributed worker, like
    /// `connect-distributed.sh`: joins the worker file's `group.id` with the
    /// other workers (walrelay's), keeps connectors in its
    /// `config.storage.topic` and serves Connect's REST API on its
    /// `listeners`; each Debezium PostgreSQL connector assigned here runs
    /// as a pipeline.
    ConnectDistributed {
        /// The worker file (`connect-distributed.properties`).
        worker: PathBuf,
    },
}

fn main() -> ExitCode {
    cli::ca_roots::find_ca_certificates();
    let cli = Cli::parse();
    cli::logging::init(cli.log_format);
    let overrides = RunOverrides {
        metrics_listen: cli.metrics_addr.clone(),
        web_config_file: cli.web_config_file.clone(),
        exit_on_pipeline_failure: cli.exit_on_pipeline_failure,
    };
    match cli.command {
        Command::Run { config } => cli::run(&config, &overrides),
        Command::Check { config, pipeline } => cli::check(&config, pipeline.as_deref()),
        Command::Status {
            watch,
            pipeline,
            ca_file,
            cert_file,
            key_file,
            user,
            password_file,
        } => cli::status(
            cli.metrics_addr.as_deref(),
            watch,
            pipeline,
            cli::StatusAccess {
                ca_file,
                cert_file,
                key_file,
                user,
                password_file,
            },
        ),
        Command::Replay {
            config,
            pipeline,
            condition,
            since,
            yes,
        } => cli::replay(&config, pipeline.as_deref(), condition, since, yes),
        Command::Validate { config } => cli::validate(&config),
        Command::ConnectStandalone {
            validate,
            worker,
            connectors,
        } => cli::connect_standalone(&worker, &connectors, validate, &overrides),
        Command::ConnectDistributed { worker } => cli::connect_distributed(&worker, &overrides),
    }
}
