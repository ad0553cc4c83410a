//! Kafka's config providers, resolved as a Connect worker resolves them
//! before a connector sees its values: `config.providers` names them, and
//! each one's `.class` is `FileConfigProvider` (`${file:/path.properties:key}`
//! when it is named `file`), `DirectoryConfigProvider` (`${directory:/dir:file}`)
//! or `EnvVarConfigProvider` (`${env:VAR}`). A reference to a provider not
//! listed stays as it is, as Kafka leaves it.
//!
//! Owns reading the referenced files and variables. It never logs a value,
//! never puts a resolved value in an error (only the key, the file and the
//! name it looked for), and never connects.

use std::collections::BTreeMap;
use std::path::Path;

use super::read_properties;
use crate::config::ConfigError;

const FILE_PROVIDER: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
const DIRECTORY_PROVIDER: &str = "org.apache.kafka.common.config.provider.DirectoryConfigProvider";
const ENV_PROVIDER: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";

/// A Kafka `ConfigProvider` walrelay resolves.
#[derive(Debug, Clone, Copy)]
enum Provider {
    /// `${name:/path/file.properties:key}`.
    File,
    /// `${name:/dir:file}`: the file's content.
    Directory,
    /// `${name:VAR}`.
    Env,
}

/// Resolves Kafka Connect config-provider references
/// (`config.providers=file` + `config.providers.file.class=...FileConfigProvider`,
/// then `${file:/secrets/pg.properties:password}`) in every worker and
/// connector value, as the worker does before a connector sees them.
pub(super) fn resolve_providers(
    worker: &mut BTreeMap<String, String>,
    connector: &mut BTreeMap<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let Some(list) = worker.remove("config.providers") else {
        return Ok(());
    };
    let mut providers = BTreeMap::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let class_key = format!("config.providers.{name}.class");
        let provider = match worker.remove(&class_key).as_deref().map(str::trim) {
            Some(FILE_PROVIDER) => Provider::File,
            Some(DIRECTORY_PROVIDER) => Provider::Directory,
            Some(ENV_PROVIDER) => Provider::Env,
            Some(other) => {
                return Err(ConfigError::Unsupported {
                    key: class_key,
                    reason: format!(
                        "walrelay resolves FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider, not {other}"
                    ),
                })
            }
            None => {
                return Err(ConfigError::Missing {
                    key: class_key,
                    reason: "config.providers names it".into(),
                })
            }
        };
        providers.insert(name.to_owned(), provider);
    }
    for map in [worker, connector] {
        for (key, value) in map.iter_mut() {
            if value.contains("${") {
                *value = substitute_providers(key, value, &providers, env)?;
            }
        }
    }
    Ok(())
}

fn substitute_providers(
    key: &str,
    value: &str,
    providers: &BTreeMap<String, Provider>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let reference = &rest[start..start + 2 + end + 1];
        rest = &after[end + 1..];
        // Kafka's pattern: provider ':' [path ':'] key.
        let Some((name, tail)) = inner.split_once(':') else {
            out.push_str(reference);
            continue;
        };
        let Some(provider) = providers.get(name) else {
            // Unknown provider: Kafka leaves the reference as it is.
            out.push_str(reference);
            continue;
        };
        let (path, item) = match tail.split_once(':') {
            Some((p, k)) => (Some(p), k),
            None => (None, tail),
        };
        let missing = |what: String| ConfigError::Invalid {
            key: key.to_owned(),
            reason: what,
        };
        let resolved = match (provider, path) {
            (Provider::Env, None) => env(item)
                .ok_or_else(|| missing(format!("environment variable {item} is not set")))?,
            (Provider::File, Some(path)) => {
                let props = read_properties(Path::new(path))?;
                props
                    .get(item)
                    .cloned()
                    .ok_or_else(|| missing(format!("{path} has no key {item}")))?
            }
            (Provider::Directory, Some(dir)) => {
                let file = Path::new(dir).join(item);
                std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
                    path: file.clone(),
                    source,
                })?
            }
            _ => {
                return Err(missing(format!(
                    "cannot resolve ${{{name}:...}}: wrong number of parts"
                )))
            }
        };
        out.push_str(&resolved);
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_references() {
        let providers: BTreeMap<String, Provider> = [("env".to_owned(), Provider::Env)].into();
        let env = |name: &str| (name == "PW").then(|| "secret".to_owned());
        let sub = |v: &str| substitute_providers("k", v, &providers, &env);
        assert_eq!(sub("${env:PW}").unwrap(), "secret");
        assert_eq!(sub("a${env:PW}b${env:PW}").unwrap(), "asecretbsecret");
        // Other references stay as they are.
        assert_eq!(sub("${routedByValue}").unwrap(), "${routedByValue}");
        assert_eq!(sub("${vault:x:y}").unwrap(), "${vault:x:y}");
        assert_eq!(sub("${env:PW").unwrap(), "${env:PW");
        assert!(sub("${env:UNSET}").is_err());
    }
}
