//! The routes of Connect's `ConnectorsResource`, `ConnectorPluginsResource`,
//! `RootResource` and `LoggingResource`: matching a path and method as
//! Jersey does (percent-decoded segments, an optional trailing slash,
//! 404/405 otherwise), and the methods each path allows.
//!
//! Owns the table of paths; [`super::handlers`] answers them.

use hyper::Method;
use percent_encoding::percent_decode_str;

/// A matched resource path, its parameters percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/`.
    Root,
    /// `/health`.
    Health,
    /// `/connectors`.
    Connectors,
    /// `/connectors/{c}`.
    Connector(String),
    /// `/connectors/{c}/config`.
    Config(String),
    /// `/connectors/{c}/status`.
    Status(String),
    /// `/connectors/{c}/restart`.
    Restart(String),
    /// `/connectors/{c}/pause`.
    Pause(String),
    /// `/connectors/{c}/resume`.
    Resume(String),
    /// `/connectors/{c}/stop`.
    Stop(String),
    /// `/connectors/{c}/tasks`.
    Tasks(String),
    /// `/connectors/{c}/tasks/{t}/status` (`t` unparsed: Jersey answers
    /// 404 when it is no integer).
    TaskStatus(String, String),
    /// `/connectors/{c}/tasks/{t}/restart`.
    TaskRestart(String, String),
    /// `/connectors/{c}/topics`.
    Topics(String),
    /// `/connectors/{c}/topics/reset`.
    TopicsReset(String),
    /// `/connectors/{c}/offsets`.
    Offsets(String),
    /// `/connector-plugins`.
    Plugins,
    /// `/connector-plugins/{p}/config`.
    PluginConfig(String),
    /// `/connector-plugins/{p}/config/validate`.
    Validate(String),
    /// `/admin/loggers`.
    Loggers,
    /// `/admin/loggers/{l}`.
    Logger(String),
}

impl Route {
    /// The methods Jersey serves on this path (besides HEAD and OPTIONS,
    /// which it adds).
    pub(crate) fn methods(&self) -> &'static [Method] {
        use Route::*;
        match self {
            Root | Health | Status(_) | TaskStatus(..) | Topics(_) | Plugins | PluginConfig(_)
            | Loggers => &[Method::GET],
            Connectors => &[Method::GET, Method::POST],
            Connector(_) => &[Method::GET, Method::DELETE],
            Config(_) => &[Method::GET, Method::PUT, Method::PATCH],
            Restart(_) | TaskRestart(..) => &[Method::POST],
            Pause(_) | Resume(_) | Stop(_) | TopicsReset(_) | Validate(_) => &[Method::PUT],
            // POST is Connect's internal task-config endpoint.
            Tasks(_) => &[Method::GET, Method::POST],
            Offsets(_) => &[Method::GET, Method::PATCH, Method::DELETE],
            Logger(_) => &[Method::GET, Method::PUT],
        }
    }

    /// Whether the resource reads a JSON body (`@Consumes` JSON with an
    /// entity parameter).
    pub(crate) fn takes_body(&self, method: &Method) -> bool {
        use Route::*;
        match self {
            Connectors => method == Method::POST,
            Config(_) => method == Method::PUT || method == Method::PATCH,
            Offsets(_) => method == Method::PATCH,
            Validate(_) | Logger(_) => method == Method::PUT,
            _ => false,
        }
    }

    /// Whether the basic auth filter lets this request through unchecked
    /// (`JaasBasicAuthFilter`'s internal requests: `POST
    /// /connectors/{c}/tasks`; the fence endpoint is not served).
    pub(crate) fn auth_exempt(&self, method: &Method) -> bool {
        matches!(self, Route::Tasks(_)) && method == Method::POST
    }

    /// The `Allow` header of OPTIONS: Jersey's order for `/connectors`
    /// is `HEAD,POST,GET,OPTIONS` (HEAD first when GET is served, the
    /// resource's methods last-declared first, OPTIONS last).
    pub(crate) fn allow_header(&self) -> String {
        let methods = self.methods();
        let mut names: Vec<&str> = Vec::new();
        if methods.contains(&Method::GET) {
            names.push("HEAD");
        }
        names.extend(methods.iter().rev().map(Method::as_str));
        names.push("OPTIONS");
        names.join(",")
    }
}

/// Splits a raw path into decoded segments (one trailing slash allowed,
/// as Jersey). `None` when a segment is not valid UTF-8 once decoded.
fn segments(path: &str) -> Option<Vec<String>> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Some(Vec::new());
    }
    trimmed
        .split('/')
        .map(|s| {
            percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(std::borrow::Cow::into_owned)
        })
        .collect()
}

/// The resource at `path`, or `None` (Jersey's 404).
pub(crate) fn route(path: &str) -> Option<Route> {
    let segs = segments(path)?;
    if segs.iter().any(String::is_empty) {
        return None;
    }
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let own = |x: &str| x.to_owned();
    Some(match s.as_slice() {
        [] => Route::Root,
        ["health"] => Route::Health,
        ["connectors"] => Route::Connectors,
        ["connectors", c] => Route::Connector(own(c)),
        ["connectors", c, "config"] => Route::Config(own(c)),
        ["connectors", c, "status"] => Route::Status(own(c)),
        ["connectors", c, "restart"] => Route::Restart(own(c)),
        ["connectors", c, "pause"] => Route::Pause(own(c)),
        ["connectors", c, "resume"] => Route::Resume(own(c)),
        ["connectors", c, "stop"] => Route::Stop(own(c)),
        ["connectors", c, "tasks"] => Route::Tasks(own(c)),
        ["connectors", c, "tasks", t, "status"] => Route::TaskStatus(own(c), own(t)),
        ["connectors", c, "tasks", t, "restart"] => Route::TaskRestart(own(c), own(t)),
        ["connectors", c, "topics"] => Route::Topics(own(c)),
        ["connectors", c, "topics", "reset"] => Route::TopicsReset(own(c)),
        ["connectors", c, "offsets"] => Route::Offsets(own(c)),
        ["connector-plugins"] => Route::Plugins,
        ["connector-plugins", p, "config"] => Route::PluginConfig(own(p)),
        ["connector-plugins", p, "config", "validate"] => Route::Validate(own(p)),
        ["admin", "loggers"] => Route::Loggers,
        ["admin", "loggers", l] => Route::Logger(own(l)),
        _ => return None,
    })
}

/// The query's parameters, decoded as Jersey decodes them (`+` is a
/// space), in order (a repeated name appears repeatedly).
pub(crate) fn query_params(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_decode_str(&s).decode_utf8_lossy().into_owned()
    };
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// A boolean query parameter as Jersey converts it with `@DefaultValue`:
/// the first value; empty or absent gives `default`; otherwise true only
/// for `true` in any case (`Boolean.valueOf`).
pub(crate) fn bool_param(params: &[(String, String)], name: &str, default: bool) -> bool {
    match params.iter().find(|(k, _)| k == name) {
        Some((_, v)) if !v.trim().is_empty() => v.eq_ignore_ascii_case("true"),
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_as_jersey() {
        assert_eq!(route("/"), Some(Route::Root));
        assert_eq!(route(""), Some(Route::Root));
        assert_eq!(route("/connectors/"), Some(Route::Connectors));
        assert_eq!(
            route("/connectors/my%20conn/status"),
            Some(Route::Status("my conn".into()))
        );
        assert_eq!(
            route("/connectors/a+b"),
            Some(Route::Connector("a+b".into()))
        );
        assert_eq!(route("/connectors/n1/tasks-config"), None);
        assert_eq!(route("/connectors//status"), None);
        assert_eq!(
            route("/connectors/n1/tasks/x/status"),
            Some(Route::TaskStatus("n1".into(), "x".into()))
        );
    }

    #[test]
    fn reads_booleans_as_jersey() {
        let p = query_params(Some(
            "includeTasks=TRUE&onlyFailed=yes&x=&expand=a&expand=b",
        ));
        assert!(bool_param(&p, "includeTasks", false));
        assert!(!bool_param(&p, "onlyFailed", false));
        assert!(bool_param(&p, "x", true));
        assert!(bool_param(&p, "missing", true));
        assert_eq!(p.iter().filter(|(k, _)| k == "expand").count(), 2);
    }
}
