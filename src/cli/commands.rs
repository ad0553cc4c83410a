//! The commands that read and report: `check`, `status`, `validate` and
//! `replay`. Each prints its result to stdout and its error to stderr.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{printing_errors, runtime, select, CliError};
use crate::config::ProcessConfig;
use crate::metrics::DEFAULT_LISTEN;
use crate::postgres::poll::replay::{replay as replay_rows, ReplayCondition};
use crate::status::{run_status, StatusOptions};

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

/// `walrelay status`: the view of the walrelay listening at `metrics_addr`
/// (default [`DEFAULT_LISTEN`]), once or every `watch` seconds; 1 only
/// when it cannot be read (or runs no such `pipeline`).
pub fn status(
    metrics_addr: Option<&str>,
    watch: Option<u64>,
    pipeline: Option<String>,
) -> ExitCode {
    let mut opts = StatusOptions::for_addr(metrics_addr.unwrap_or(DEFAULT_LISTEN));
    opts.watch = watch.map(Duration::from_secs);
    opts.pipeline = pipeline;
    printing_errors(
        runtime::command()
            .and_then(|rt| rt.block_on(run_status(opts)).map_err(CliError::from))
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
