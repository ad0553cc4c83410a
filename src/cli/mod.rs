//! The commands behind `walrelay`'s subcommands: `src/main.rs` parses the
//! command line and calls one function of this module per subcommand,
//! which loads what it needs, runs, prints its result and returns the
//! process's exit status.
//!
//! Owns the exit statuses (0 done, 1 failed or a check did not pass, 2 the
//! configuration or the request is wrong and nothing ran), where an error
//! is reported (stderr as `error: <chain>`, or the log for `run`, whose
//! output is its log), the tokio runtimes, which pipelines a command acts
//! on, and the signals that stop `run`. It decides nothing a pipeline, the
//! checks or `status` decide: it calls them.

use std::io;
use std::process::ExitCode;

use tracing::error;

use crate::chain::DisplayChain;
use crate::config::ConfigError;
use crate::pipeline::{PipelineError, ProcessError};
use crate::postgres::poll::replay::ReplayError;
use crate::status::StatusError;

pub mod ca_roots;
mod commands;
pub mod logging;
mod run;
mod runtime;
mod select;
pub mod version;

pub use commands::{check, replay, status, validate, StatusAccess};
pub use logging::LogFormat;
pub use run::{connect_distributed, connect_standalone, run, RunOverrides};

/// Exit status of a configuration or request that is wrong.
const EXIT_USAGE: u8 = 2;

/// Errors of the commands.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The configuration does not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `--pipeline` names no pipeline of the configuration.
    #[error("--pipeline {name:?}: no such pipeline; the configuration has {known}")]
    NoSuchPipeline {
        /// The name asked for.
        name: String,
        /// The configuration's pipelines, comma-separated.
        known: String,
    },
    /// A command of one pipeline, and several to choose from.
    #[error("the configuration has several pipelines: choose one with --pipeline ({known})")]
    SeveralPipelines {
        /// The configuration's pipelines, comma-separated.
        known: String,
    },
    /// A distributed worker could not start.
    #[error("connect-distributed")]
    Distributed(#[source] Box<crate::distributed::run::StartError>),
    /// The tokio runtime could not be built.
    #[error("cannot start the tokio runtime")]
    Runtime(#[source] io::Error),
    /// A pipeline's plan could not be made.
    #[error("pipeline {name}")]
    Plan {
        /// The pipeline.
        name: String,
        /// Why (boxed: the plan's errors are large, and rare).
        #[source]
        source: Box<PipelineError>,
    },
    /// The process's pipelines stopped on an error.
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// `--password-file` cannot be read.
    #[error("cannot read --password-file {path}")]
    PasswordFile {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// `--user` without a password.
    #[error(
        "--user needs a password: give --password-file or set {}",
        PASSWORD_ENV
    )]
    NoPassword,
    /// `walrelay status` could not read the listener.
    #[error(transparent)]
    Status(#[from] StatusError),
    /// `walrelay replay` refused or failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// Where `walrelay status --user` finds the password without
/// `--password-file`.
pub(crate) const PASSWORD_ENV: &str = "WALRELAY_STATUS_PASSWORD";

impl CliError {
    /// 2 when the configuration or the request is wrong (nothing ran), 1
    /// when running failed.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Config(_)
            | CliError::NoSuchPipeline { .. }
            | CliError::SeveralPipelines { .. }
            | CliError::NoPassword => ExitCode::from(EXIT_USAGE),
            CliError::Replay(e) if e.is_refusal() => ExitCode::from(EXIT_USAGE),
            _ => ExitCode::FAILURE,
        }
    }
}

/// The exit status of `result`, its error printed to stderr.
fn printing_errors(result: Result<ExitCode, CliError>) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("error: {}", DisplayChain(&e));
        e.exit_code()
    })
}

/// The exit status of `result`, its error logged (`run`'s output is its
/// log).
fn logging_errors(result: Result<ExitCode, CliError>) -> ExitCode {
    result.unwrap_or_else(|e| {
        match &e {
            CliError::Config(_) => error!(error = %DisplayChain(&e), "invalid configuration"),
            _ => error!(error = DisplayChain(&e).to_string(), "walrelay stopped"),
        }
        e.exit_code()
    })
}
