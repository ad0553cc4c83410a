//! What each route answers: Connect's resource methods, turned into
//! [`Herder`] calls, their answers into Connect's JSON ([`super::json`]).
//!
//! Owns the status codes of successes, the checks Connect's resources
//! make before calling the herder, and the memory of each connector's
//! configuration key order (see [`KeyOrders`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use hyper::Method;

use crate::distributed::api::{ApiError, ConfigMap, Herder};

use super::body;
use super::json::{self, KeyOrder, OrderedConfig};
use super::routes::{bool_param, Route};

/// A response before it becomes HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The status.
    pub(crate) status: u16,
    /// The JSON body (`None`: no body and no Content-Type).
    pub(crate) body: Option<String>,
    /// The body's Content-Type (Jersey leaves it out for errors raised
    /// before a resource method is chosen).
    pub(crate) content_type: Option<&'static str>,
    /// `Location` (201).
    pub(crate) location: Option<String>,
    /// `Allow` (405, OPTIONS).
    pub(crate) allow: Option<String>,
}

impl Reply {
    /// A JSON body.
    pub(crate) fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            body: Some(body),
            content_type: Some("application/json"),
            location: None,
            allow: None,
        }
    }

    /// No body.
    pub(crate) fn empty(status: u16) -> Reply {
        Reply {
            status,
            body: None,
            content_type: None,
            location: None,
            allow: None,
        }
    }

    /// Connect's `ErrorMessage`.
    pub(crate) fn error(e: &ApiError) -> Reply {
        Reply::json(e.status, json::error(e))
    }

    /// Jersey's own error (`HTTP 404 Not Found`...), without Content-Type.
    pub(crate) fn jersey(status: u16, reason: &str) -> Reply {
        let e = ApiError::new(status, format!("HTTP {status} {reason}"));
        Reply {
            content_type: None,
            ..Reply::error(&e)
        }
    }
}

/// Each connector's configuration keys in the order its `HashMap` was
/// filled, remembered from the requests that wrote it (the herder's
/// [`ConfigMap`] is sorted; Connect's answers follow this order, see
/// [`json::hashmap_order`]). Unknown connectors fall back to sorted keys.
#[derive(Debug, Default)]
pub(crate) struct KeyOrders(Mutex<HashMap<String, Vec<String>>>);

impl KeyOrders {
    /// The insertion order known for `name`.
    pub(crate) fn get(&self, name: &str) -> Vec<String> {
        self.0
            .lock()
            .map(|m| m.get(name).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Remembers `keys` for `name`.
    fn set(&self, name: &str, keys: Vec<String>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(name.to_owned(), keys);
        }
    }

    /// Forgets `name`.
    fn remove(&self, name: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(name);
        }
    }
}

/// What a handler needs of the request.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    /// The method (HEAD already mapped to GET).
    pub(crate) method: &'a Method,
    /// The matched route.
    pub(crate) route: Route,
    /// The query's parameters.
    pub(crate) params: Vec<(String, String)>,
    /// The body.
    pub(crate) body: &'a [u8],
    /// `scheme://host[:port]` of this request, for `Location`.
    pub(crate) base: String,
}

/// The server's state shared by every connection.
#[derive(Debug)]
pub(crate) struct Ctx<H> {
    /// The worker.
    pub(crate) herder: std::sync::Arc<H>,
    /// Topic tracking (`topic.tracking.enable`).
    pub(crate) topic_tracking: bool,
    /// Topic tracking resets (`topic.tracking.allow.reset`).
    pub(crate) topic_tracking_reset: bool,
    /// `GET /admin/loggers`' root level.
    pub(crate) log_level: String,
    /// Configuration key orders.
    pub(crate) orders: KeyOrders,
}

/// Turns a herder result into a reply.
fn answer<T>(r: Result<T, ApiError>, ok: impl FnOnce(T) -> Reply) -> Reply {
    match r {
        Ok(v) => ok(v),
        Err(e) => Reply::error(&e),
    }
}

/// Answers a matched request.
pub(crate) async fn dispatch<H: Herder>(ctx: &Ctx<H>, call: &Call<'_>) -> Reply {
    use Route::*;
    let h = &*ctx.herder;
    match (&call.route, call.method.clone()) {
        (Root, _) => Reply::json(200, json::server_info(&h.server_info())),
        (Health, _) => Reply::json(
            200,
            "{\"status\":\"healthy\",\"message\":\"Worker has completed startup and is ready to handle requests.\"}".into(),
        ),
        (Connectors, Method::GET) => list_connectors(ctx, &call.params),
        (Connectors, _) => create_connector(ctx, call).await,
        (Connector(c), Method::GET) => connector_info(ctx, c),
        (Connector(c), _) => answer(h.delete_connector(c).await, |()| {
            ctx.orders.remove(c);
            Reply::empty(204)
        }),
        (Config(c), Method::GET) => answer(h.connector_config(c), |cfg| {
            let mut out = String::new();
            json::push_config(&mut out, &cfg, KeyOrder::HashMap(&ctx.orders.get(c)));
            Reply::json(200, out)
        }),
        (Config(c), Method::PUT) => put_config(ctx, c, call.body, &call.base).await,
        (Config(c), _) => patch_config(ctx, c, call.body).await,
        (Status(c), _) => answer(h.connector_status(c), |s| {
            let mut out = String::new();
            json::push_connector_status(&mut out, &s, plugin_version(h, c).as_deref());
            Reply::json(200, out)
        }),
        (Restart(c), _) => restart(ctx, c, &call.params).await,
        (Pause(c), _) => answer(h.pause(c).await, |()| Reply::empty(202)),
        (Resume(c), _) => answer(h.resume(c).await, |()| Reply::empty(202)),
        // `stopConnector` is a void method: Jersey answers 204.
        (Stop(c), _) => answer(h.stop(c).await, |()| Reply::empty(204)),
        (Tasks(c), Method::GET) => answer(h.task_configs(c), |t| {
            Reply::json(200, json::task_infos(&t, &ctx.orders.get(c)))
        }),
        (Tasks(_), _) => Reply::error(&ApiError::new(400, "Internal request missing required signature")),
        (TaskStatus(c, t), _) => match t.parse::<i32>() {
            Ok(t) => answer(h.task_status(c, t), |s| {
                let mut out = String::new();
                json::push_task_state(&mut out, &s, plugin_version(h, c).as_deref());
                Reply::json(200, out)
            }),
            Err(_) => Reply::error(&ApiError::new(404, "HTTP 404 Not Found")),
        },
        (TaskRestart(c, t), _) => match t.parse::<i32>() {
            Ok(t) => answer(h.restart_task(c, t).await, |()| Reply::empty(204)),
            Err(_) => Reply::error(&ApiError::new(404, "HTTP 404 Not Found")),
        },
        (Topics(c), _) => topics(ctx, c),
        (TopicsReset(c), _) => topics_reset(ctx, c).await,
        (Offsets(c), Method::GET) => answer(h.offsets(c).await, |o| Reply::json(200, json::offsets(&o))),
        (Offsets(c), Method::PATCH) => match body::offsets_body(call.body) {
            Ok(o) => answer(h.alter_offsets(c, o).await, |m| Reply::json(200, json::message(&m))),
            Err(e) => Reply::error(&e),
        },
        (Offsets(c), _) => answer(h.reset_offsets(c).await, |m| Reply::json(200, json::message(&m))),
        (Plugins, _) => Reply::json(
            200,
            json::plugins(&h.plugins(bool_param(&call.params, "connectorsOnly", true))),
        ),
        (PluginConfig(p), _) => plugin_config(ctx, p).await,
        (Validate(p), _) => validate(ctx, p, call.body).await,
        (Loggers, _) => Reply::json(200, format!("{{\"root\":{}}}", level_json(&ctx.log_level))),
        (Logger(l), Method::GET) if l == "root" => Reply::json(200, level_json(&ctx.log_level)),
        (Logger(l), Method::GET) => Reply::error(&ApiError::new(404, format!("Logger {l} not found."))),
        (Logger(_), _) => set_level(call.body),
    }
}

/// `LoggerLevel`: `level`, `last_modified` (never modified here).
fn level_json(level: &str) -> String {
    let mut out = String::from("{\"level\":");
    json::push_str(&mut out, level);
    out.push_str(",\"last_modified\":null}");
    out
}

/// `PUT /admin/loggers/{l}`: Connect's checks of the body; walrelay
/// cannot change its level at run time (501).
fn set_level(body: &[u8]) -> Reply {
    let level = match body::config_body(body) {
        Ok(Some(m)) => m.get("level").flatten().map(str::to_owned),
        Ok(None) => return Reply::error(&body::null_config()),
        Err(e) => return Reply::error(&e),
    };
    let Some(level) = level else {
        return Reply::error(&ApiError::new(
            400,
            "Desired 'level' parameter was not specified in request.",
        ));
    };
    let known = [
        "OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL",
    ];
    if !known.contains(&level.to_ascii_uppercase().as_str()) {
        return Reply::error(&ApiError::new(404, format!("invalid log level '{level}'.")));
    }
    Reply::error(&ApiError::new(
        501,
        "walrelay cannot change log levels at run time",
    ))
}

/// The version of the connector plugin `name` runs (the status'
/// `version`), from its `connector.class` and the plugin list.
pub(crate) fn plugin_version<H: Herder>(h: &H, name: &str) -> Option<String> {
    let class = h
        .connector_config(name)
        .ok()?
        .get("connector.class")?
        .clone();
    h.plugins(true)
        .into_iter()
        .find(|p| {
            p.class == class
                || p.class.ends_with(&format!(".{class}"))
                || p.class.ends_with(&format!(".{class}Connector"))
        })
        .and_then(|p| p.version)
}

/// `GET /connectors` with and without `expand`.
fn list_connectors<H: Herder>(ctx: &Ctx<H>, params: &[(String, String)]) -> Reply {
    let h = &*ctx.herder;
    let names = match h.connector_names() {
        Ok(n) => n,
        Err(e) => return Reply::error(&e),
    };
    let names = json::hashmap_order(names.iter().map(String::as_str));
    let expand: Vec<&str> = params
        .iter()
        .filter(|(k, _)| k == "expand")
        .map(|(_, v)| v.as_str())
        .collect();
    if !params.iter().any(|(k, _)| k == "expand") {
        return Reply::json(200, json::string_list(&names));
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    'names: for name in &names {
        let mut parts: Vec<(&str, String)> = Vec::new();
        for e in &expand {
            let part = match *e {
                "status" => h.connector_status(name).map(|s| {
                    let mut out = String::new();
                    json::push_connector_status(&mut out, &s, plugin_version(h, name).as_deref());
                    out
                }),
                "info" => h.connector_info(name).map(|i| {
                    let mut out = String::new();
                    json::push_connector_info(
                        &mut out,
                        &i,
                        KeyOrder::HashMap(&ctx.orders.get(name)),
                    );
                    out
                }),
                _ => continue,
            };
            match part {
                Ok(p) => {
                    parts.retain(|(k, _)| k != e);
                    parts.push((e, p));
                }
                // Removed meanwhile: left out, as Connect does.
                Err(err) if err.status == 404 => continue 'names,
                Err(err) => return Reply::error(&err),
            }
        }
        let order = json::hashmap_order(parts.iter().map(|(k, _)| *k));
        let mut obj = String::from("{");
        for (i, k) in order.iter().enumerate() {
            if i > 0 {
                obj.push(',');
            }
            json::push_str(&mut obj, k);
            obj.push(':');
            obj.push_str(parts.iter().find(|(pk, _)| pk == k).map_or("", |(_, v)| v));
        }
        obj.push('}');
        entries.push((name.to_string(), obj));
    }
    let mut out = String::from("{");
    for (i, (name, obj)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::push_str(&mut out, name);
        out.push(':');
        out.push_str(obj);
    }
    out.push('}');
    Reply::json(200, out)
}

/// `GET /connectors/{c}`.
fn connector_info<H: Herder>(ctx: &Ctx<H>, c: &str) -> Reply {
    answer(ctx.herder.connector_info(c), |info| {
        let mut out = String::new();
        json::push_connector_info(&mut out, &info, KeyOrder::HashMap(&ctx.orders.get(c)));
        Reply::json(200, out)
    })
}

/// Connect's `checkAndPutConnectorConfigName`.
fn check_and_put_name(name: &str, config: &mut OrderedConfig) -> Result<(), ApiError> {
    match config.get("name") {
        Some(Some(included)) if included != name => Err(ApiError::new(
            400,
            format!("Connector name configuration ({included}) doesn't match connector name in the URL ({name})"),
        )),
        Some(Some(_)) => Ok(()),
        _ => {
            config.put("name", Some(name.to_owned()));
            Ok(())
        }
    }
}

/// `scheme://host/connectors/{name}`, the name encoded as a path.
fn location(base: &str, name: &str) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
    /// What Jersey's `UriBuilder.path` encodes.
    const PATH: &AsciiSet = &CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'%')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'[')
        .add(b'\\')
        .add(b']')
        .add(b'^')
        .add(b'`')
        .add(b'{')
        .add(b'|')
        .add(b'}');
    format!("{base}/connectors/{}", utf8_percent_encode(name, PATH))
}

/// Writes a configuration and answers 201 or 200 with the request's key
/// order (Connect echoes the `LinkedHashMap` it read).
async fn write_config<H: Herder>(
    ctx: &Ctx<H>,
    name: &str,
    config: &OrderedConfig,
    allow_replace: bool,
    base: &str,
) -> Reply {
    let keys: Vec<String> = config
        .0
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k.clone())
        .collect();
    let cfg: ConfigMap = config.to_config();
    match ctx.herder.put_config(name, cfg, allow_replace).await {
        Ok(created) => {
            ctx.orders.set(name, keys.clone());
            let mut out = String::new();
            json::push_connector_info(&mut out, &created.value, KeyOrder::Request(&keys));
            let mut reply = Reply::json(if created.created { 201 } else { 200 }, out);
            if created.created {
                reply.location = Some(location(base, name));
            }
            reply
        }
        Err(e) => Reply::error(&e),
    }
}

/// `POST /connectors`.
async fn create_connector<H: Herder>(ctx: &Ctx<H>, call: &Call<'_>) -> Reply {
    let req = match body::create_body(call.body) {
        Ok(r) => r,
        Err(e) => return Reply::error(&e),
    };
    // Java's trim: every char up to U+0020.
    let name = req
        .name
        .as_deref()
        .unwrap_or("")
        .trim_matches(|c: char| c <= ' ')
        .to_owned();
    let Some(mut config) = req.config else {
        return Reply::error(&body::null_config());
    };
    if let Err(e) = check_and_put_name(&name, &mut config) {
        return Reply::error(&e);
    }
    match req.initial_state.as_deref() {
        None | Some("RUNNING") => {}
        Some(s @ ("PAUSED" | "STOPPED")) => {
            return Reply::error(&ApiError::new(
                400,
                format!("walrelay cannot create a connector in the {s} state yet; create it, then PUT /connectors/{name}/{}", if s == "PAUSED" { "pause" } else { "stop" }),
            ))
        }
        Some(other) => {
            return Reply::error(&ApiError::new(
                500,
                format!("No enum constant org.apache.kafka.connect.runtime.rest.entities.CreateConnectorRequest.InitialState.{other}"),
            ))
        }
    }
    write_config(ctx, &name, &config, false, &call.base).await
}

/// `PUT /connectors/{c}/config`.
async fn put_config<H: Herder>(ctx: &Ctx<H>, c: &str, body: &[u8], base: &str) -> Reply {
    let mut config = match body::config_body(body) {
        Ok(Some(c)) => c,
        Ok(None) => return Reply::error(&body::null_config()),
        Err(e) => return Reply::error(&e),
    };
    if let Err(e) = check_and_put_name(c, &mut config) {
        return Reply::error(&e);
    }
    write_config(ctx, c, &config, true, base).await
}

/// `PATCH /connectors/{c}/config`: answered in `HashMap` order (Connect
/// patches a copy of the stored map, then appends the patch's keys).
async fn patch_config<H: Herder>(ctx: &Ctx<H>, c: &str, body: &[u8]) -> Reply {
    let patch = match body::config_body(body) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Reply::error(&ApiError::new(
                500,
                "Cannot invoke \"java.util.Map.forEach(java.util.function.BiConsumer)\" because \"patch\" is null",
            ))
        }
        Err(e) => return Reply::error(&e),
    };
    let before = ctx.orders.get(c);
    let old_keys: Vec<String> = match ctx.herder.connector_config(c) {
        Ok(old) => {
            let mut known: Vec<&str> = before
                .iter()
                .map(String::as_str)
                .filter(|k| old.contains_key(*k))
                .collect();
            known.extend(
                old.keys()
                    .map(String::as_str)
                    .filter(|k| !before.iter().any(|b| b == k)),
            );
            json::hashmap_order(known)
                .into_iter()
                .map(str::to_owned)
                .collect()
        }
        Err(_) => Vec::new(),
    };
    match ctx.herder.patch_config(c, patch.to_patch()).await {
        Ok(info) => {
            let mut keys = old_keys;
            for (k, v) in &patch.0 {
                if v.is_some() && !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
            ctx.orders.set(c, keys.clone());
            let mut out = String::new();
            json::push_connector_info(&mut out, &info, KeyOrder::HashMap(&keys));
            Reply::json(200, out)
        }
        Err(e) => Reply::error(&e),
    }
}

/// `POST /connectors/{c}/restart`: 204 for a connector-only restart,
/// else 202 with the state.
async fn restart<H: Herder>(ctx: &Ctx<H>, c: &str, params: &[(String, String)]) -> Reply {
    let include_tasks = bool_param(params, "includeTasks", false);
    let only_failed = bool_param(params, "onlyFailed", false);
    let h = &*ctx.herder;
    match h.restart_connector(c, include_tasks, only_failed).await {
        Err(e) => Reply::error(&e),
        Ok(_) if !include_tasks && !only_failed => Reply::empty(204),
        Ok(None) => Reply::empty(202),
        Ok(Some(state)) => {
            let mut out = String::new();
            json::push_connector_status(&mut out, &state, plugin_version(h, c).as_deref());
            Reply::json(202, out)
        }
    }
}

/// `GET /connectors/{c}/topics`.
fn topics<H: Herder>(ctx: &Ctx<H>, c: &str) -> Reply {
    if !ctx.topic_tracking {
        return Reply::error(&ApiError::new(403, "Topic tracking is disabled."));
    }
    answer(ctx.herder.active_topics(c), |t| {
        Reply::json(200, json::active_topics(c, &t))
    })
}

/// `PUT /connectors/{c}/topics/reset`.
async fn topics_reset<H: Herder>(ctx: &Ctx<H>, c: &str) -> Reply {
    if !ctx.topic_tracking {
        return Reply::error(&ApiError::new(403, "Topic tracking is disabled."));
    }
    if !ctx.topic_tracking_reset {
        return Reply::error(&ApiError::new(403, "Topic tracking reset is disabled."));
    }
    answer(ctx.herder.reset_active_topics(c).await, |()| {
        Reply::empty(202)
    })
}

/// Connect's `normalizedPluginName`: a trailing `Connector` dropped.
fn normalized(name: &str) -> &str {
    match name.strip_suffix("Connector") {
        Some(s) if !s.is_empty() => s,
        _ => name,
    }
}

/// `PUT /connector-plugins/{p}/config/validate`.
async fn validate<H: Herder>(ctx: &Ctx<H>, plugin: &str, body: &[u8]) -> Reply {
    let config = match body::config_body(body) {
        Ok(Some(c)) => c,
        Ok(None) => return Reply::error(&body::null_config()),
        Err(e) => return Reply::error(&e),
    };
    if let Some(Some(class)) = config.get("connector.class") {
        if !normalized(class).ends_with(normalized(plugin)) {
            return Reply::error(&ApiError::new(
                400,
                format!("Included connector type {class} does not match request type {plugin}"),
            ));
        }
    }
    answer(ctx.herder.validate(plugin, config.to_config()).await, |v| {
        Reply::json(200, json::config_infos(&v))
    })
}

/// Connect's base groups (a connector's own keys come first in
/// `GET /connector-plugins/{p}/config`).
const BASE_GROUPS: &[&str] = &[
    "Common",
    "Transforms",
    "Predicates",
    "Error Handling",
    "Topic Creation",
    "Exactly Once Support",
    "offsets.topic",
];

/// `GET /connector-plugins/{p}/config`: the definitions of a validation
/// of `{connector.class: p}`, the plugin's own keys before Connect's.
async fn plugin_config<H: Herder>(ctx: &Ctx<H>, plugin: &str) -> Reply {
    let h = &*ctx.herder;
    let known = h.plugins(false).into_iter().any(|p| {
        p.class == plugin
            || p.class.ends_with(&format!(".{plugin}"))
            || normalized(p.class.rsplit('.').next().unwrap_or("")) == plugin
    });
    if !known {
        return Reply::error(&ApiError::new(404, format!("Unknown plugin {plugin}.")));
    }
    let config: ConfigMap = BTreeMap::from([("connector.class".to_owned(), plugin.to_owned())]);
    answer(h.validate(plugin, config).await, |v| {
        let defs: Vec<&serde_json::Map<String, serde_json::Value>> = v
            .get("configs")
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.get("definition")?.as_object())
                    .collect()
            })
            .unwrap_or_default();
        let is_base = |d: &&serde_json::Map<String, serde_json::Value>| {
            let g = d
                .get("group")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            BASE_GROUPS.contains(&g)
                || g.starts_with("Transforms: ")
                || g.starts_with("Predicates: ")
        };
        let mut ordered: Vec<_> = defs.iter().copied().filter(|d| !is_base(d)).collect();
        ordered.extend(defs.iter().copied().filter(|d| is_base(d)));
        Reply::json(200, json::config_key_infos(&ordered))
    })
}
