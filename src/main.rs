//! The `walrelay` command line: parses arguments, loads configuration,
//! installs logging and signal handling, builds the pipeline's plan and the
//! process's metrics, and runs the pipeline. It must never hold logic of its own: every decision lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use tokio::sync::watch;
use tracing::{error, info};
use walrelay::chain::DisplayChain;
use walrelay::config::{Config, OnPipelineFailure, ProcessConfig};
use walrelay::metrics::Process;
use walrelay::pipeline::{self, Plan};

#[derive(Parser)]
#[command(
    name = "walrelay",
    version,
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
    /// Exit (status 1) as soon as one pipeline stops on a fatal error,
    /// stopping the others gracefully, instead of keeping them running;
    /// overrides `runtime.on_pipeline_failure`.
    #[arg(long, global = true)]
    exit_on_pipeline_failure: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
    /// Show a running walrelay's state from its metrics endpoint
    /// (`--metrics-addr`, default 127.0.0.1:9187, or a full http:// URL):
    /// a section per pipeline, with a table of them first when there are
    /// several. Exits 1 only when the endpoint cannot be read (or has no
    /// such --pipeline), whatever state the pipelines are in.
    Status {
        /// Refresh every SECS seconds until Ctrl-C.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        watch: Option<u64>,
        /// Show only this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
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
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WALRELAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let metrics_addr = cli.metrics_addr.clone();
    let exit_on_failure = cli.exit_on_pipeline_failure;
    let run_to_exit = move |mut config: ProcessConfig| {
        if let Some(addr) = &metrics_addr {
            config.set_metrics_listen(addr);
        }
        if exit_on_failure {
            config.set_on_pipeline_failure(OnPipelineFailure::Exit);
        }
        run_to_exit(config)
    };
    match cli.command {
        Command::Check { config, pipeline } => {
            let config = match ProcessConfig::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {}", DisplayChain(&e));
                    return ExitCode::from(2);
                }
            };
            let chosen: Vec<&Config> = match &pipeline {
                Some(name) => match config.pipeline(name) {
                    Some(p) => vec![p],
                    None => {
                        eprintln!("error: --pipeline {name:?}: {}", no_such_pipeline(&config));
                        return ExitCode::from(2);
                    }
                },
                None => config.pipelines.iter().collect(),
            };
            let rt = match runtime() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            let mut passed = true;
            let several = config.pipelines.len() > 1;
            for (i, p) in chosen.iter().enumerate() {
                if several {
                    if i > 0 {
                        println!();
                    }
                    println!("pipeline {}", p.name);
                }
                let report = rt.block_on(walrelay::check::run_check(p));
                print!("{report}");
                passed &= report.passed();
            }
            if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Status { watch, pipeline } => {
            let addr = cli
                .metrics_addr
                .clone()
                .unwrap_or_else(|| walrelay::metrics::DEFAULT_LISTEN.to_owned());
            let mut opts = walrelay::status::StatusOptions::for_addr(&addr);
            opts.watch = watch.map(std::time::Duration::from_secs);
            opts.pipeline = pipeline;
            let result = match runtime() {
                Ok(rt) => rt.block_on(walrelay::status::run_status(opts)),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {}", DisplayChain(&e));
                    ExitCode::FAILURE
                }
            }
        }
        Command::Replay {
            config,
            pipeline,
            condition,
            since,
            yes,
        } => {
            use walrelay::postgres::poll::replay::{replay, ReplayCondition};
            let process = match ProcessConfig::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {}", DisplayChain(&e));
                    return ExitCode::from(2);
                }
            };
            let config = match (&pipeline, process.pipelines.as_slice()) {
                (None, [only]) => only,
                (None, _) => {
                    eprintln!(
                        "error: the configuration has several pipelines: choose one with --pipeline ({})",
                        pipeline_names(&process)
                    );
                    return ExitCode::from(2);
                }
                (Some(name), _) => match process.pipeline(name) {
                    Some(p) => p,
                    None => {
                        eprintln!("error: --pipeline {name:?}: {}", no_such_pipeline(&process));
                        return ExitCode::from(2);
                    }
                },
            };
            let condition = match ReplayCondition::from_options(condition, since) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {}", DisplayChain(&e));
                    return ExitCode::from(2);
                }
            };
            let result = match runtime() {
                Ok(rt) => rt.block_on(replay(
                    &config.postgres,
                    &config.outbox,
                    &config.source,
                    &config.poll,
                    &condition,
                    yes,
                )),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            match result {
                Ok(outcome) => {
                    println!("{outcome}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {}", DisplayChain(&e));
                    if e.is_refusal() {
                        ExitCode::from(2)
                    } else {
                        ExitCode::FAILURE
                    }
                }
            }
        }
        Command::Validate { config } => match ProcessConfig::load(&config) {
            Ok(process) => {
                if process.pipelines.len() > 1 {
                    println!(
                        "{}: ok ({} pipelines: {})",
                        config.display(),
                        process.pipelines.len(),
                        pipeline_names(&process)
                    );
                } else {
                    println!("{}: ok", config.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}", DisplayChain(&e));
                ExitCode::from(2)
            }
        },
        Command::Run { config } => {
            let config = match ProcessConfig::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    error!(error = %DisplayChain(&e), "invalid configuration");
                    return ExitCode::from(2);
                }
            };
            run_to_exit(config)
        }
        Command::ConnectStandalone {
            validate,
            worker,
            connectors,
        } => {
            let (process, translations) = match ProcessConfig::from_connect(&worker, &connectors) {
                Ok(t) => t,
                Err(e) => {
                    if validate {
                        eprintln!("error: {}", DisplayChain(&e));
                    } else {
                        error!(error = %DisplayChain(&e), "invalid configuration");
                    }
                    return ExitCode::from(2);
                }
            };
            for (t, file) in translations.iter().zip(&connectors) {
                let _in_file = tracing::info_span!("connector", file = %file.display()).entered();
                t.warn();
            }
            if validate {
                let files: Vec<String> =
                    connectors.iter().map(|c| c.display().to_string()).collect();
                println!("{} + {}: ok", worker.display(), files.join(" + "));
                return ExitCode::SUCCESS;
            }
            run_to_exit(process)
        }
    }
}

fn pipeline_names(process: &ProcessConfig) -> String {
    let names: Vec<&str> = process.pipelines.iter().map(|p| p.name.as_str()).collect();
    names.join(", ")
}

fn no_such_pipeline(process: &ProcessConfig) -> String {
    format!(
        "no such pipeline; the configuration has {}",
        pipeline_names(process)
    )
}

fn run_to_exit(config: ProcessConfig) -> ExitCode {
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!(error = format!("{e:#}"), "walrelay stopped");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("walrelay")
        .build()
        .context("cannot start the tokio runtime")
}

/// The relay's runtime: `runtime.worker_threads = 0` keeps every task on
/// the main thread, so handing a batch from the source to the sink is a
/// local wake-up rather than a cross-thread one (librdkafka has its own
/// threads either way).
fn relay_runtime(config: &ProcessConfig) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match config.runtime().worker_threads {
        0 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    builder
        .enable_all()
        .thread_name("walrelay")
        .build()
        .context("cannot start the tokio runtime")
}

fn run(config: ProcessConfig) -> anyhow::Result<()> {
    let runtime = relay_runtime(&config)?;
    let listen = config.metrics().listen.clone();
    let on_failure = config.runtime().on_pipeline_failure;
    let plans = config
        .pipelines
        .into_iter()
        .map(|c| {
            let name = c.name.clone();
            Plan::new(c).map_err(|e| anyhow::anyhow!("pipeline {name}: {}", DisplayChain(&e)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let process = Arc::new(Process::new());
    runtime.block_on(async move {
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            info!("shutdown requested");
            let _ = stop_tx.send(true);
            // A second signal while draining: leave at once.
            wait_for_signal().await;
            std::process::exit(130);
        });
        pipeline::run_process(plans, process, &listen, on_failure, stop_rx)
            .await
            .map_err(|e| anyhow::anyhow!("{}", DisplayChain(&e)))
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())
        .expect("installing a SIGTERM handler cannot fail at start-up");
    let mut int = signal(SignalKind::interrupt())
        .expect("installing a SIGINT handler cannot fail at start-up");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
