//! Debezium Server's `application.properties`, translated into walrelay's
//! [`Config`](crate::config::Config).
//!
//! Owns what Quarkus and MicroProfile Config do to the file before Debezium
//! Server sees it: `%profile.` keys, environment overrides
//! (`DEBEZIUM_SOURCE_DATABASE_PASSWORD` for `debezium.source.database.password`)
//! and `${...}` expansion with `$${...}` as the escape for a literal `${...}`;
//! then the `debezium.source.*`, `debezium.sink.*`, `debezium.format.*` and
//! `debezium.transforms.*` sections. Connector, producer and transform keys
//! go through the Kafka Connect form's pieces ([`super::kafka_connect`]), so
//! both forms decide every key alike. It never logs a value, never puts a
//! possibly secret value in an error, and never connects.

use std::collections::BTreeMap;
use std::path::Path;

use super::kafka_connect::connector::{classify_rest, translate_connector};
use super::kafka_connect::exactly_once::translate_server;
use super::kafka_connect::producer::translate_producer;
use super::kafka_connect::server_sinks::{
    sink_kind, translate_sink, unsupported_sink, ServerFormats,
};
use super::kafka_connect::transforms::translate_transforms;
use super::kafka_connect::{parse_bool, Draft, Keys, Notes, Translation};
use crate::config::ConfigError;
use crate::connect::config::{ConverterKind, ConvertersConfig, HeaderConverterKind};
use crate::properties::{decode_text, parse_properties};
use crate::sink::config::SinkKind;

/// Looks up an environment variable (injectable for tests).
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Deepest `${...}` nesting followed before giving up (a cycle).
const MAX_EXPANSION_DEPTH: usize = 32;

/// Connector keys that an environment variable may set even when the file
/// does not mention them (MicroProfile cannot tell `_` from `.` in a name
/// it has not seen, so only known names can be recovered).
const ENV_SOURCE_KEYS: &[&str] = &[
    "connector.class",
    "name",
    "tasks.max",
    "database.hostname",
    "database.port",
    "database.user",
    "database.password",
    "database.dbname",
    "database.sslmode",
    "database.sslrootcert",
    "database.sslcert",
    "database.sslkey",
    "database.sslpassword",
    "database.targetServerType",
    "plugin.name",
    "slot.name",
    "publication.name",
    "publication.autocreate.mode",
    "slot.drop.on.stop",
    "slot.failover",
    "snapshot.mode",
    "table.include.list",
    "schema.include.list",
    "skipped.operations",
    "topic.prefix",
    "extended.headers.enabled",
    "heartbeat.interval.ms",
    "heartbeat.action.query",
    "topic.heartbeat.prefix",
    "topic.heartbeat.name",
];

/// Producer keys an environment variable may set without the file.
const ENV_PRODUCER_KEYS: &[&str] = &[
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "acks",
    "compression.type",
    "linger.ms",
    "batch.size",
    "client.id",
];

/// Other keys an environment variable may set without the file.
const ENV_OTHER_KEYS: &[&str] = &[
    "debezium.sink.type",
    "debezium.format.key",
    "debezium.format.value",
    "debezium.format.header",
    "debezium.format.schemas.enable",
    "debezium.format.key.schemas.enable",
    "debezium.format.value.schemas.enable",
    "debezium.format.header.schemas.enable",
    "debezium.transforms",
    "debezium.predicates",
];

/// EventRouter option names an environment variable may set without the
/// file, once `debezium.transforms` names the transform.
const ENV_ROUTER_KEYS: &[&str] = &[
    "type",
    "predicate",
    "negate",
    "table.field.event.id",
    "table.field.event.key",
    "table.field.event.type",
    "table.field.event.payload",
    "table.field.event.timestamp",
    "table.fields.additional.placement",
    "table.field.additional.missing",
    "table.field.event.schema.version",
    "route.by.field",
    "route.topic.regex",
    "route.topic.replacement",
    "route.tombstone.on.empty.payload",
    "table.op.invalid.behavior",
    "table.expand.json.payload",
    "table.json.payload.null.behavior",
    "table.json.payload.empty.array.behavior",
];

/// Reads Debezium Server's `application.properties` with the process
/// environment and translates it.
pub(super) fn load_server(path: &Path) -> Result<Translation, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    let env = |name: &str| std::env::var(name).ok();
    from_server_text(&decode_text(&bytes), path, &env)
}

/// Translates `application.properties` text; `env` stands for the process
/// environment and `path` is only used in messages.
pub fn from_server_text(
    text: &str,
    path: &Path,
    env: EnvLookup<'_>,
) -> Result<Translation, ConfigError> {
    let in_file = |e: ConfigError| ConfigError::InFile {
        path: path.to_owned(),
        source: Box::new(e),
    };
    let raw = parse_properties(text).map_err(|source| ConfigError::Syntax {
        path: path.to_owned(),
        source: source.into(),
    })?;
    let mut notes = Notes::default();
    let props = resolve(raw, env, &mut notes).map_err(in_file)?;
    translate(props, &mut notes)
        .map(|config| Translation {
            config,
            ignored: notes.into_vec(),
        })
        .map_err(in_file)
}

/// The MicroProfile environment lookup for a property name: the name
/// itself, then with every non-alphanumeric character as `_`, then that
/// upper-cased.
fn env_for_property(env: EnvLookup<'_>, name: &str) -> Option<String> {
    if let Some(v) = env(name) {
        return Some(v);
    }
    let mapped: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    env(&mapped).or_else(|| env(&mapped.to_ascii_uppercase()))
}

/// Applies profiles, environment overrides and `${...}` expansion.
fn resolve(
    raw: BTreeMap<String, String>,
    env: EnvLookup<'_>,
    notes: &mut Notes,
) -> Result<BTreeMap<String, String>, ConfigError> {
    // Profiles: `%prod.key` wins over `key` when the profile is prod
    // (Quarkus's default for a packaged application).
    let profile = env("QUARKUS_PROFILE")
        .or_else(|| raw.get("quarkus.profile").cloned())
        .unwrap_or_else(|| "prod".into());
    let mut props = BTreeMap::new();
    let mut profiled = BTreeMap::new();
    for (key, value) in raw {
        match key.strip_prefix('%').and_then(|k| k.split_once('.')) {
            Some((p, rest)) if p == profile => {
                profiled.insert(rest.to_owned(), value);
            }
            Some(_) => notes.ignore(key, "ignored: belongs to another Quarkus profile"),
            None => {
                props.insert(key, value);
            }
        }
    }
    props.extend(profiled);

    // Environment overrides, for the file's keys and for known keys.
    let mut known: Vec<String> = ENV_OTHER_KEYS.iter().map(|k| (*k).to_owned()).collect();
    known.extend(
        ENV_SOURCE_KEYS
            .iter()
            .map(|k| format!("debezium.source.{k}")),
    );
    known.extend(
        ENV_PRODUCER_KEYS
            .iter()
            .map(|k| format!("debezium.sink.kafka.producer.{k}")),
    );
    let transforms = env_for_property(env, "debezium.transforms")
        .or_else(|| props.get("debezium.transforms").cloned())
        .unwrap_or_default();
    for name in transforms
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        known.extend(
            ENV_ROUTER_KEYS
                .iter()
                .map(|k| format!("debezium.transforms.{name}.{k}")),
        );
    }
    known.extend(props.keys().cloned());
    for key in known {
        if let Some(value) = env_for_property(env, &key) {
            props.insert(key, value);
        }
    }

    // Expansion.
    let mut out = BTreeMap::new();
    for (key, value) in &props {
        let expanded = expand(value, key, &props, env, 0)?;
        out.insert(key.clone(), expanded);
    }
    // Knative's sink binding: the http sink posts to `K_SINK` when it is
    // set, whatever debezium.sink.http.url says.
    if out.get("debezium.sink.type").map(|t| t.trim()) == Some("http") {
        if let Some(url) = env("K_SINK") {
            out.insert("debezium.sink.http.url".into(), url);
        }
    }
    Ok(out)
}

/// Expands `${name}` and `${name:default}` in `value` (the value of `key`);
/// `$${...}` stands for a literal `${...}`.
fn expand(
    value: &str,
    key: &str,
    props: &BTreeMap<String, String>,
    env: EnvLookup<'_>,
    depth: usize,
) -> Result<String, ConfigError> {
    if depth > MAX_EXPANSION_DEPTH {
        return Err(ConfigError::Invalid {
            key: key.to_owned(),
            reason: "${...} expansion nests too deep (a reference cycle?)".into(),
        });
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(after) = rest.strip_prefix("$${") {
            // Escaped: copy `${...}` literally.
            let end = matching_brace(after).ok_or_else(|| unterminated(key))?;
            out.push_str("${");
            out.push_str(&after[..=end]);
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix("${") {
            let end = matching_brace(after).ok_or_else(|| unterminated(key))?;
            let inner = &after[..end];
            let (name, default) = match split_default(inner) {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            let name = expand(name, key, props, env, depth + 1)?;
            let found = env_for_property(env, &name).or_else(|| props.get(&name).cloned());
            let resolved = match (found, default) {
                (Some(v), _) => expand(&v, key, props, env, depth + 1)?,
                (None, Some(d)) => expand(d, key, props, env, depth + 1)?,
                (None, None) => {
                    return Err(ConfigError::Missing {
                        key: name,
                        reason: format!(
                            "{key} refers to it with ${{...}}, but it is neither a property nor an environment variable \
                             (write $${{...}} for a literal ${{...}})"
                        ),
                    })
                }
            };
            out.push_str(&resolved);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn unterminated(key: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        reason: "a ${ has no matching }".into(),
    }
}

/// Index of the `}` closing an expression whose `${` was just consumed.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Splits `name:default` at the first `:` outside nested `${...}`.
fn split_default(inner: &str) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ':' if depth == 0 => return Some((&inner[..i], &inner[i + 1..])),
            _ => {}
        }
    }
    None
}

/// The sections of a resolved file, translated.
fn translate(
    props: BTreeMap<String, String>,
    notes: &mut Notes,
) -> Result<crate::config::Config, ConfigError> {
    let mut all = Keys::new(props, "");
    let mut source = Keys::new(all.take_prefixed("debezium.source."), "debezium.source.");
    let format = all.take_prefixed("debezium.format.");
    let formats = ServerFormats {
        key: format.get("key").map(|v| v.trim().to_owned()),
        value: format.get("value").map(|v| v.trim().to_owned()),
        header: format.get("header").map(|v| v.trim().to_owned()),
    };
    let converters = translate_format(format, notes)?;
    let mut draft = Draft::new(converters);
    draft.debezium.server_mode = true;

    // Sink.
    const SINKS: &str =
        "kafka, nats-jetstream, redis, rabbitmq, rabbitmqstream, http, sqs, sns, kinesis, pubsub, pulsar and eventhubs (over its Kafka endpoint)";
    let sink_type = all.take("debezium.sink.type");
    // Event Hubs through its Kafka endpoint: the Kafka sink, configured
    // from the eventhubs keys; every outbox record to the hub.
    let eventhubs = sink_type.as_deref().map(str::trim) == Some("eventhubs");
    let kind = match if eventhubs {
        Some("kafka")
    } else {
        sink_type.as_deref()
    } {
        None | Some("") => {
            return Err(ConfigError::Missing {
                key: "debezium.sink.type".into(),
                reason: format!("walrelay implements the {SINKS} sinks"),
            })
        }
        Some(name) => sink_kind(name).ok_or_else(|| ConfigError::Unsupported {
            key: "debezium.sink.type".into(),
            reason: match unsupported_sink(name) {
                Some(why) => format!("walrelay implements the {SINKS} sinks: {why}"),
                None => format!("walrelay implements the {SINKS} sinks, not {name}"),
            },
        })?,
    };
    let mut hub = None;
    if eventhubs {
        let mut own = Keys::new(
            all.take_prefixed("debezium.sink.eventhubs."),
            "debezium.sink.eventhubs.",
        );
        hub = Some(super::kafka_connect::eventhubs::eventhubs(
            &mut own, &mut draft, notes,
        )?);
        super::kafka_connect::server_sinks::rest(&mut own)?;
        for key in all.take_prefixed("debezium.sink.").into_keys() {
            notes.ignore(
                format!("debezium.sink.{key}"),
                "ignored: a setting of another sink than debezium.sink.type=eventhubs",
            );
        }
    } else if kind == SinkKind::Kafka {
        let producer = all.take_prefixed("debezium.sink.kafka.producer.");
        translate_producer(
            producer,
            "debezium.sink.kafka.producer.",
            &mut draft.kafka,
            notes,
        )?;
        for key in all.take_prefixed("debezium.sink.").into_keys() {
            notes.ignore(
                format!("debezium.sink.{key}"),
                "ignored: walrelay waits for every delivery itself",
            );
        }
    } else {
        draft.sink = translate_sink(kind, all.take_prefixed("debezium.sink."), &formats, notes)?;
        // jsonbytearray hands the rabbitmq sink byte[] header values, which
        // its AMQP client writes as byte arrays (observed side by side).
        if let Some(rabbitmq) = draft.sink.rabbitmq.as_mut() {
            rabbitmq.header_byte_arrays = formats
                .header
                .as_deref()
                .is_some_and(|h| h.eq_ignore_ascii_case("jsonbytearray"));
        }
    }

    // Connector, transform.
    translate_connector(&mut source, &mut draft, notes)?;
    translate_server(&mut source, &draft.kafka, notes)?;
    let mut transforms = BTreeMap::new();
    for (key, value) in all.take_prefixed("debezium.") {
        if key == "transforms"
            || key.starts_with("transforms.")
            || key == "predicates"
            || key.starts_with("predicates.")
        {
            transforms.insert(key, value);
        } else {
            all_other(notes, &format!("debezium.{key}"));
        }
    }
    let mut transforms = Keys::new(transforms, "debezium.");
    translate_transforms(&mut transforms, &mut draft, notes)?;
    if let Some(hub) = hub {
        // The sink ignores the record's topic: everything to the hub (a
        // hub's name has no `$` for the rewrite to read).
        draft.router.route_topic_replacement = hub;
    }
    if kind == SinkKind::Sns {
        super::kafka_connect::aws_sinks::sns_converters(
            &mut draft.converters,
            &draft.router,
            notes,
        );
    }
    classify_rest(&mut source, notes)?;
    for key in all.drain().into_keys() {
        all_other(notes, &key);
    }
    draft.finish("debezium.sink.kafka.producer.bootstrap.servers")
}

fn all_other(notes: &mut Notes, key: &str) {
    let why = if key.starts_with("quarkus.") {
        "ignored: a Quarkus setting (log with WALRELAY_LOG)"
    } else {
        "ignored: not a Debezium Server setting walrelay uses"
    };
    notes.ignore(key, why);
}

/// `debezium.format.{key,value,header}` and `[.role].schemas.enable`
/// (keys given without the `debezium.format.` prefix).
fn translate_format(
    format: BTreeMap<String, String>,
    notes: &mut Notes,
) -> Result<ConvertersConfig, ConfigError> {
    let mut f = Keys::new(format, "debezium.format.");
    // Every role defaults to json: JsonConverter with schemas.enable=true,
    // headers included.
    let mut c = ConvertersConfig {
        key: ConverterKind::Json,
        key_schemas_enable: true,
        value: ConverterKind::Json,
        value_schemas_enable: true,
        header: HeaderConverterKind::Json,
        header_schemas_enable: true,
    };
    for role in ["key", "value"] {
        let kind = match f.take(role).as_deref() {
            None | Some("json" | "jsonbytearray") => ConverterKind::Json,
            Some("simplestring") => ConverterKind::String,
            Some("binary") => ConverterKind::BinaryData,
            Some(other) => {
                return Err(ConfigError::Unsupported {
                    key: f.name(role),
                    reason: format!(
                    "walrelay implements json, jsonbytearray, simplestring and binary, not {other}"
                ),
                })
            }
        };
        if role == "key" {
            c.key = kind;
        } else {
            c.value = kind;
        }
    }
    match f.take("header").as_deref() {
        None | Some("json" | "jsonbytearray") => {}
        Some(other) => {
            return Err(ConfigError::Unsupported {
                key: f.name("header"),
                reason: format!("walrelay implements json and jsonbytearray headers, not {other}"),
            })
        }
    }
    let bool_of = |f: &mut Keys, key: &str| -> Result<Option<bool>, ConfigError> {
        match f.take(key) {
            None => Ok(None),
            Some(v) => parse_bool(&v)
                .map(Some)
                .ok_or_else(|| ConfigError::Invalid {
                    key: f.name(key),
                    reason: format!("{v:?} is not true or false"),
                }),
        }
    };
    if let Some(all) = bool_of(&mut f, "schemas.enable")? {
        c.key_schemas_enable = all;
        c.value_schemas_enable = all;
        c.header_schemas_enable = all;
    }
    if let Some(v) = bool_of(&mut f, "key.schemas.enable")? {
        c.key_schemas_enable = v;
    }
    if let Some(v) = bool_of(&mut f, "value.schemas.enable")? {
        c.value_schemas_enable = v;
    }
    if let Some(v) = bool_of(&mut f, "header.schemas.enable")? {
        c.header_schemas_enable = v;
    }
    for (key, value) in f.drain() {
        let setting = ["key.", "value.", "header."]
            .iter()
            .find_map(|role| key.strip_prefix(role))
            .unwrap_or(&key);
        match crate::config::kafka_connect::converters::byte_setting(setting, &value) {
            Some(Err(why)) => {
                return Err(ConfigError::Unsupported {
                    key: format!("debezium.format.{key}"),
                    reason: why,
                })
            }
            Some(Ok(())) => notes.ignore(
                format!("debezium.format.{key}"),
                "ignored: it is at the value walrelay implements",
            ),
            None => notes.ignore(
                format!("debezium.format.{key}"),
                "ignored: not a converter setting walrelay implements",
            ),
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn exp(value: &str, props: &[(&str, &str)], env: EnvLookup<'_>) -> Result<String, ConfigError> {
        let props = props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        expand(value, "k", &props, env, 0)
    }

    #[test]
    fn expansion() {
        let env = env_of(&[("HOST", "db"), ("A_B", "from-env")]);
        assert_eq!(exp("${HOST}:5432", &[], &env).unwrap(), "db:5432");
        assert_eq!(exp("x${p}y", &[("p", "P${HOST}")], &env).unwrap(), "xPdby");
        assert_eq!(exp("${missing:dflt}", &[], &env).unwrap(), "dflt");
        assert_eq!(exp("${missing:${HOST}}", &[], &env).unwrap(), "db");
        // Environment beats the file, through the MicroProfile name mapping.
        assert_eq!(exp("${a.b}", &[("a.b", "file")], &env).unwrap(), "from-env");
        assert_eq!(
            exp("outbox.event.$${routedByValue}", &[], &env).unwrap(),
            "outbox.event.${routedByValue}"
        );
        assert_eq!(exp("cost $5 $", &[], &env).unwrap(), "cost $5 $");
        let err = exp("${nope}", &[], &env).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
        let err = exp("${a}", &[("a", "${b}"), ("b", "${a}")], &env).unwrap_err();
        assert!(err.to_string().contains("too deep"), "{err}");
        assert!(exp("${open", &[], &env).is_err());
    }

    /// The converter settings that change the bytes are refused away
    /// from Kafka's defaults under `debezium.format.*`, per role or for
    /// all, as in a worker file; the others are warned about.
    #[test]
    fn format_settings_that_change_bytes() {
        const BASE: &str = include_str!("../../tests/data/debezium/application.properties");
        let translate = |line: &str| {
            from_server_text(
                &format!("{BASE}\n{line}\n"),
                Path::new("application.properties"),
                &|name: &str| (name == "PG_HOST").then(|| "db.internal".to_owned()),
            )
        };
        for line in [
            "debezium.format.value.decimal.format=NUMERIC",
            "debezium.format.replace.null.with.default=false",
            "debezium.format.key.converter.encoding=UTF-16",
        ] {
            let err = translate(line).expect_err(line);
            let key = line.split('=').next().unwrap();
            let text = crate::chain::DisplayChain(&err).to_string();
            assert!(text.contains(key), "{key} not named: {text}");
        }
        let t = translate("debezium.format.value.decimal.format=BASE64").unwrap();
        assert!(t.ignored("debezium.format.value.decimal.format"));
        let t = translate("debezium.format.value.schemas.cache.size=10").unwrap();
        assert!(t.ignored("debezium.format.value.schemas.cache.size"));
    }

    /// The connector keys the transform chain refuses or ignores are named
    /// where the file has them, under `debezium.source.`.
    #[test]
    fn connector_keys_the_chain_names_are_under_source() {
        const BASE: &str = include_str!("../../tests/data/debezium/application.properties");
        let translate = |lines: &str| {
            from_server_text(
                &format!("{BASE}\n{lines}\n"),
                Path::new("application.properties"),
                &|name: &str| (name == "PG_HOST").then(|| "db.internal".to_owned()),
            )
        };
        const DECODE: &str = "debezium.transforms=decode,outbox\n\
            debezium.transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
        for (lines, key) in [
            (DECODE.to_owned(), "debezium.source.tombstones.on.delete"),
            (
                format!("{DECODE}\ndebezium.source.tombstones.on.delete=false\ndebezium.source.binary.handling.mode=base64"),
                "debezium.source.binary.handling.mode",
            ),
        ] {
            let err = translate(&lines).expect_err(key);
            let text = crate::chain::DisplayChain(&err).to_string();
            assert!(text.contains(&format!("{key} is not supported")), "{key} not named: {text}");
        }
        let t = translate("debezium.source.tombstones.on.delete=false").unwrap();
        assert!(t.ignored("debezium.source.tombstones.on.delete"));
    }

    #[test]
    fn env_name_mapping() {
        let env = env_of(&[("DEBEZIUM_SOURCE_DATABASE_PASSWORD", "pw")]);
        assert_eq!(
            env_for_property(&env, "debezium.source.database.password").as_deref(),
            Some("pw")
        );
        assert_eq!(
            env_for_property(&env, "debezium.source.database.user"),
            None
        );
    }

    /// `debezium.sink.type=eventhubs`: the Kafka producer on the
    /// namespace's Kafka endpoint, every record to the hub.
    #[test]
    fn eventhubs_becomes_the_kafka_producer_on_the_namespace() {
        const BASE: &str = include_str!("../../tests/data/debezium/application.properties");
        let connection = "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=s3cr3t=";
        let translate = |extra: &str| {
            let text = format!(
                "{}\ndebezium.sink.type=eventhubs\ndebezium.sink.eventhubs.connectionstring={connection}\n\
                 debezium.sink.eventhubs.hubname=orders\n{extra}",
                BASE.replace("debezium.sink.type=kafka", "")
            );
            from_server_text(&text, Path::new("application.properties"), &|name: &str| {
                (name == "PG_HOST").then(|| "db.internal".to_owned())
            })
        };
        let t = translate("debezium.sink.eventhubs.maxbatchsize=1000\n").unwrap();
        let kafka = &t.config.kafka;
        assert_eq!(kafka.bootstrap_servers, "shop.servicebus.windows.net:9093");
        assert_eq!(kafka.producer["security.protocol"], "SASL_SSL");
        assert_eq!(kafka.producer["sasl.mechanism"], "PLAIN");
        assert_eq!(kafka.producer["sasl.username"], "$ConnectionString");
        assert_eq!(kafka.secrets["sasl.password"].expose(), connection);
        assert!(!format!("{:?}", t.config).contains("s3cr3t"));
        assert_eq!(t.config.router.route_topic_replacement, "orders");
        assert!(t.ignored("debezium.sink.eventhubs.maxbatchsize"));
        let err = translate("debezium.sink.eventhubs.partitionid=1\n").unwrap_err();
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(
            text.contains("debezium.sink.eventhubs.partitionid"),
            "{text}"
        );
        let err =
            translate("debezium.sink.eventhubs.dynamicpartitionrouting=PARTITIONID\n").unwrap_err();
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(text.contains("dynamicpartitionrouting"), "{text}");
    }

    /// `debezium.sink.type=http` with the file's keys, and Knative's
    /// `K_SINK` in place of the URL when set.
    #[test]
    fn http_sink_and_k_sink() {
        const BASE: &str = include_str!("../../tests/data/debezium/application.properties");
        let text = format!(
            "{}\ndebezium.sink.type=http\ndebezium.sink.http.url=http://127.0.0.1:8080/events\n",
            BASE.replace("debezium.sink.type=kafka", "")
        );
        let translate = |k_sink: Option<&'static str>| {
            from_server_text(
                &text,
                Path::new("application.properties"),
                &move |name: &str| match name {
                    "PG_HOST" => Some("db.internal".to_owned()),
                    "K_SINK" => k_sink.map(str::to_owned),
                    _ => None,
                },
            )
        };
        let t = translate(None).unwrap();
        let http = t.config.sink.http.as_ref().unwrap();
        assert_eq!(http.url, "http://127.0.0.1:8080/events");
        assert!(t.ignored("debezium.sink.kafka.producer.compression.type"));
        let t = translate(Some("http://broker-ingress.knative/ns/default")).unwrap();
        assert_eq!(
            t.config.sink.http.as_ref().unwrap().url,
            "http://broker-ingress.knative/ns/default"
        );
    }
}
