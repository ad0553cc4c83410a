//! The commands that read and report: `check`, `status`, `validate` and
//! `replay`. Each prints its result to stdout and its error to stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::{printing_errors, runtime, select, CliError, PASSWORD_ENV};
use crate::config::ProcessConfig;
use crate::metrics::DEFAULT_LISTEN;
use crate::postgres::poll::replay::{replay as replay_rows, ReplayCondition};
use crate::secret::Secret;
use crate::status::{run_status, Access, StatusOptions};

/// `walrelay check`: the preflight of pipeline `pipeline`, or of every
/// pipeline (a report each, under its name when there are several); 1
/// when a row failed.
pub fn check(config: &Path, pipeline: Option<&str>) -> ExitCode {
    printing_errors(check_pipelines(config, pipeline))
}

fn check_pipelines(path: &Path, pipeline: Option<&str>) -> Result<ExitCode, CliError> {
    let config = ProcessConfig::load(path)?;
    let chosen = select::chosen(&config, pipeline)?;
    let rt = runtime::command()?;
    let several = config.pipelines.len() > 1;
    let mut passed = true;
    for (i, p) in chosen.iter().enumerate() {
        if several {
            if i > 0 {
                println!();
            }
            println!("pipeline {}", p.name);
        }
        let report = rt.block_on(crate::check::run_check(p));
        print!("{report}");
        passed &= report.passed();
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How `walrelay status` reaches a secured listener, as given on the
/// command line (the password only as a file or in the environment).
#[derive(Debug, Clone, Default)]
pub struct StatusAccess {
    /// `--ca-file`.
    pub ca_file: Option<PathBuf>,
    /// `--cert-file`.
    pub cert_file: Option<PathBuf>,
    /// `--key-file`.
    pub key_file: Option<PathBuf>,
    /// `--user`.
    pub user: Option<String>,
    /// `--password-file`.
    pub password_file: Option<PathBuf>,
}

impl StatusAccess {
    /// The client's [`Access`], the password read from `password_file`
    /// (its first line) or [`PASSWORD_ENV`].
    fn access(self) -> Result<Access, CliError> {
        let password = match (&self.user, &self.password_file) {
            (None, _) => None,
            (Some(_), Some(path)) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| CliError::PasswordFile {
                        path: path.clone(),
                        source,
                    })?;
                Some(Secret::new(text.lines().next().unwrap_or("")))
            }
            (Some(_), None) => Some(Secret::new(
                std::env::var(PASSWORD_ENV).map_err(|_| CliError::NoPassword)?,
            )),
        };
        Ok(Access {
            ca_file: self.ca_file,
            cert_file: self.cert_file,
            key_file: self.key_file,
            user: self.user,
            password,
        })
    }
}

/// `walrelay status`: the view of the walrelay listening at `metrics_addr`
/// (default [`DEFAULT_LISTEN`]; read over https when a bare address comes
/// with `--ca-file` or `--cert-file`), once or every `watch` seconds,
/// reached as `access` says; 1 only when it cannot be read (or runs no
/// such `pipeline`).
pub fn status(
    metrics_addr: Option<&str>,
    watch: Option<u64>,
    pipeline: Option<String>,
    access: StatusAccess,
) -> ExitCode {
    let addr = metrics_addr.unwrap_or(DEFAULT_LISTEN);
    let tls = access.ca_file.is_some() || access.cert_file.is_some();
    let addr = if tls && !addr.contains("://") {
        format!("https://{addr}")
    } else {
        addr.to_owned()
    };
    let opts = access.access().map(|access| {
        let mut opts = StatusOptions::for_addr(&addr).with_access(access);
        opts.watch = watch.map(Duration::from_secs);
        opts.pipeline = pipeline;
        opts
    });
    printing_errors(
        opts.and_then(|opts| {
            runtime::command().and_then(|rt| rt.block_on(run_status(opts)).map_err(CliError::from))
        })
        .map(|()| ExitCode::SUCCESS),
    )
}

/// `walrelay validate`: `<file>: ok`, with the pipelines when there are
/// several.
pub fn validate(config: &Path) -> ExitCode {
    printing_errors(
        ProcessConfig::load(config)
            .map_err(CliError::from)
            .map(|process| {
                match process.pipelines.len() {
                    1 => println!("{}: ok", config.display()),
                    n => println!(
                        "{}: ok ({n} pipelines: {})",
                        config.display(),
                        select::names(&process)
                    ),
                }
                ExitCode::SUCCESS
            }),
    )
}

/// `walrelay replay`: counts (or with `yes` resets) the published rows of
/// the polling outbox of `pipeline` (the only one without a name) that
/// `condition` (`--where`) or `since` selects.
pub fn replay(
    config: &Path,
    pipeline: Option<&str>,
    condition: Option<String>,
    since: Option<String>,
    yes: bool,
) -> ExitCode {
    printing_errors(replay_pipeline(config, pipeline, condition, since, yes))
}

fn replay_pipeline(
    path: &Path,
    pipeline: Option<&str>,
    condition: Option<String>,
    since: Option<String>,
    yes: bool,
) -> Result<ExitCode, CliError> {
    let process = ProcessConfig::load(path)?;
    let config = select::one(&process, pipeline)?;
    let condition = ReplayCondition::from_options(condition, since)?;
    let rt = runtime::command()?;
    let outcome = rt.block_on(replay_rows(
        &config.postgres,
        &config.outbox,
        &config.source,
        &config.poll,
        &condition,
        yes,
    ))?;
    println!("{outcome}");
    Ok(ExitCode::SUCCESS)
}
