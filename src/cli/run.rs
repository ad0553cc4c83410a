//! `walrelay run` and `walrelay connect-standalone`: the relay, every
//! pipeline of a configuration in one process, until SIGTERM or SIGINT
//! (a second one while draining leaves at once, status 130).
//!
//! Owns the command line's overrides of the configuration, the plans, the
//! relay's runtime and the signals; what the pipelines do is
//! [`crate::pipeline::run_process`]'s. Errors go to the log.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing::{info, Instrument};

use super::{logging_errors, printing_errors, runtime, CliError};
use crate::config::{OnPipelineFailure, ProcessConfig};
use crate::metrics::Process;
use crate::pipeline::{run_process, Plan};

/// Exit status after a second signal while draining.
const EXIT_INTERRUPTED: i32 = 130;

/// What the command line overrides in the configuration of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOverrides {
    /// `--metrics-addr`: the listener, instead of `metrics.listen`.
    pub metrics_listen: Option<String>,
    /// `--web-config-file`: the listener's web configuration file, instead
    /// of `metrics.web_config_file` (the only way to give one to
    /// `connect-standalone` and `connect-distributed`, whose worker files
    /// have no place for it).
    pub web_config_file: Option<PathBuf>,
    /// `--exit-on-pipeline-failure`: `runtime.on_pipeline_failure =
    /// "exit"`.
    pub exit_on_pipeline_failure: bool,
}

impl RunOverrides {
    fn apply(&self, config: &mut ProcessConfig) {
        if let Some(addr) = &self.metrics_listen {
            config.set_metrics_listen(addr);
        }
        if let Some(file) = &self.web_config_file {
            config.set_metrics_web_config_file(file);
        }
        if self.exit_on_pipeline_failure {
            config.set_on_pipeline_failure(OnPipelineFailure::Exit);
        }
    }
}

/// `walrelay run`: every pipeline of the configuration file.
pub fn run(config: &Path, overrides: &RunOverrides) -> ExitCode {
    logging_errors(
        ProcessConfig::load(config)
            .map_err(CliError::from)
            .and_then(|config| relay(config, overrides)),
    )
}

/// `walrelay connect-standalone`: a pipeline per connector file, after
/// the translation's warnings (each under its file's name); with
/// `validate`, `ok` instead of running (and errors to stderr).
pub fn connect_standalone(
    worker: &Path,
    connectors: &[PathBuf],
    validate: bool,
    overrides: &RunOverrides,
) -> ExitCode {
    let loaded = ProcessConfig::from_connect(worker, connectors).map_err(CliError::from);
    let (process, translations) = match loaded {
        Ok(loaded) => loaded,
        Err(e) if validate => return printing_errors(Err(e)),
        Err(e) => return logging_errors(Err(e)),
    };
    for (t, file) in translations.iter().zip(connectors) {
        let _in_file = tracing::info_span!("connector", file = %file.display()).entered();
        t.warn();
    }
    if validate {
        let files: Vec<String> = connectors.iter().map(|c| c.display().to_string()).collect();
        println!("{} + {}: ok", worker.display(), files.join(" + "));
        return ExitCode::SUCCESS;
    }
    logging_errors(relay(process, overrides))
}

/// `walrelay connect-distributed`: a worker of a distributed group until
/// a signal (`crate::distributed::run`).
pub fn connect_distributed(worker: &Path, overrides: &RunOverrides) -> ExitCode {
    let map = match crate::config::kafka_connect::read_properties(worker) {
        Ok(map) => map,
        Err(e) => return logging_errors(Err(CliError::from(e))),
    };
    let runtime = match runtime::command_with(2) {
        Ok(r) => r,
        Err(e) => return logging_errors(Err(e)),
    };
    let metrics = crate::metrics::MetricsConfig {
        listen: overrides.metrics_listen.clone().unwrap_or_default(),
        web_config_file: overrides.web_config_file.clone(),
    };
    let result = runtime.block_on(async move {
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(stop_on_signals(stop_tx).instrument(tracing::info_span!("signals")));
        crate::distributed::run::run(worker, map, &metrics, stop_rx).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => logging_errors(Err(CliError::Distributed(Box::new(e)))),
    }
}

/// Runs every pipeline of `config` until a signal (or a fatal error, as
/// `runtime.on_pipeline_failure` says).
fn relay(mut config: ProcessConfig, overrides: &RunOverrides) -> Result<ExitCode, CliError> {
    overrides.apply(&mut config);
    let runtime = runtime::relay(&config)?;
    let metrics = config.metrics().clone();
    let on_failure = config.runtime().on_pipeline_failure;
    let plans = config
        .pipelines
        .into_iter()
        .map(|c| {
            let name = c.name.clone();
            Plan::new(c).map_err(|e| CliError::Plan {
                name,
                source: Box::new(e),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let process = Arc::new(Process::new());
    runtime.block_on(async move {
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(stop_on_signals(stop_tx).instrument(tracing::info_span!("signals")));
        run_process(plans, process, &metrics, on_failure, stop_rx).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Asks the pipelines to stop at the first SIGTERM or SIGINT; leaves at
/// once at the second.
async fn stop_on_signals(stop: watch::Sender<bool>) {
    wait_for_signal().await;
    info!("shutdown requested");
    let _ = stop.send(true);
    wait_for_signal().await;
    std::process::exit(EXIT_INTERRUPTED);
}

async fn wait_for_signal() {
    let mut term = signal(SignalKind::terminate())
        .expect("installing a SIGTERM handler cannot fail at start-up");
    let mut int = signal(SignalKind::interrupt())
        .expect("installing a SIGINT handler cannot fail at start-up");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
