//! Which pipelines of a configuration a command acts on (`--pipeline`),
//! and the words when there is no such pipeline or a choice to make.

use super::CliError;
use crate::config::{Config, ProcessConfig};

/// The pipeline `name`, or every pipeline without a name.
pub(super) fn chosen<'a>(
    process: &'a ProcessConfig,
    name: Option<&str>,
) -> Result<Vec<&'a Config>, CliError> {
    match name {
        Some(name) => Ok(vec![named(process, name)?]),
        None => Ok(process.pipelines.iter().collect()),
    }
}

/// The pipeline `name`, or the only one without a name.
pub(super) fn one<'a>(
    process: &'a ProcessConfig,
    name: Option<&str>,
) -> Result<&'a Config, CliError> {
    match (name, process.pipelines.as_slice()) {
        (Some(name), _) => named(process, name),
        (None, [only]) => Ok(only),
        (None, _) => Err(CliError::SeveralPipelines {
            known: names(process),
        }),
    }
}

/// The configuration's pipeline names, comma-separated.
pub(super) fn names(process: &ProcessConfig) -> String {
    let names: Vec<&str> = process.pipelines.iter().map(|p| p.name.as_str()).collect();
    names.join(", ")
}

fn named<'a>(process: &'a ProcessConfig, name: &str) -> Result<&'a Config, CliError> {
    process
        .pipeline(name)
        .ok_or_else(|| CliError::NoSuchPipeline {
            name: name.to_owned(),
            known: names(process),
        })
}
