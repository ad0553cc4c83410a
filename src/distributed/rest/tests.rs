//! The REST layer over real sockets with a fake herder: every route's
//! status, body and headers, checked against the answers recorded from
//! Kafka Connect 4.1.1's distributed worker (a Debezium 3.6.1 PostgreSQL
//! connector); HTTPS with a certificate made here; basic auth; CORS.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::distributed::api::*;
use crate::secret::Secret;

use super::auth::BasicAuth;
use super::config::{Cors, Listener, RestConfig, Scheme};
use super::serve;

/// The worker id the fake reports.
const WORKER: &str = "127.0.0.1:31666";

/// A connector the fake keeps.
#[derive(Debug, Clone)]
struct Conn {
    /// Its configuration.
    config: ConfigMap,
    /// Its state.
    state: State,
}

/// An in-memory herder answering as Connect's did.
#[derive(Debug, Default)]
struct Fake {
    /// The connectors.
    conns: Mutex<BTreeMap<String, Conn>>,
}

impl Fake {
    /// A connector, or Connect's 404.
    fn get(&self, name: &str) -> Result<Conn, ApiError> {
        let m = self
            .conns
            .lock()
            .map_err(|_| ApiError::new(500, "poisoned"))?;
        m.get(name)
            .cloned()
            .ok_or_else(|| ApiError::connector_not_found(name))
    }

    /// The connector's info.
    fn info(name: &str, c: &Conn, tasks: bool) -> ConnectorInfo {
        ConnectorInfo {
            name: name.into(),
            config: c.config.clone(),
            tasks: if tasks {
                vec![TaskId {
                    connector: name.into(),
                    task: 0,
                }]
            } else {
                vec![]
            },
            kind: Some("source"),
        }
    }

    /// Sets the state.
    fn set_state(&self, name: &str, state: State) -> Result<(), ApiError> {
        let mut m = self
            .conns
            .lock()
            .map_err(|_| ApiError::new(500, "poisoned"))?;
        let c = m
            .get_mut(name)
            .ok_or_else(|| ApiError::connector_not_found(name))?;
        c.state = state;
        Ok(())
    }
}

impl Herder for Fake {
    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            version: "4.1.1".into(),
            commit: "be816b82d25370ce".into(),
            kafka_cluster_id: "kcbyUfdmA1BEd4OTo1-8sA".into(),
        }
    }
    fn connector_names(&self) -> Result<Vec<String>, ApiError> {
        Ok(self
            .conns
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default())
    }
    fn connector_info(&self, name: &str) -> Result<ConnectorInfo, ApiError> {
        self.get(name).map(|c| Fake::info(name, &c, true))
    }
    fn connector_config(&self, name: &str) -> Result<ConfigMap, ApiError> {
        self.get(name).map(|c| c.config)
    }
    fn connector_status(&self, name: &str) -> Result<ConnectorStateInfo, ApiError> {
        let c = self
            .get(name)
            .map_err(|_| ApiError::new(404, format!("No status found for connector {name}")))?;
        let info = StateInfo {
            state: c.state,
            worker_id: WORKER.into(),
            trace: None,
        };
        Ok(ConnectorStateInfo {
            name: name.into(),
            connector: info.clone(),
            tasks: vec![TaskState { id: 0, info }],
            kind: Some("source"),
        })
    }
    fn task_configs(&self, name: &str) -> Result<Vec<TaskInfo>, ApiError> {
        let c = self.get(name)?;
        let mut config = c.config;
        config.insert(
            "task.class".into(),
            "io.debezium.connector.postgresql.PostgresConnectorTask".into(),
        );
        Ok(vec![TaskInfo {
            id: TaskId {
                connector: name.into(),
                task: 0,
            },
            config,
        }])
    }
    fn task_status(&self, name: &str, task: i32) -> Result<TaskState, ApiError> {
        let status = self.connector_status(name).ok();
        status
            .and_then(|s| s.tasks.into_iter().find(|t| t.id == task))
            .ok_or_else(|| ApiError::new(404, format!("No status found for task {name}-{task}")))
    }
    fn active_topics(&self, _name: &str) -> Result<Vec<String>, ApiError> {
        Ok(vec![])
    }
    fn plugins(&self, connectors_only: bool) -> Vec<PluginInfo> {
        let mut out = vec![PluginInfo {
            class: "io.debezium.connector.postgresql.PostgresConnector".into(),
            kind: "source",
            version: Some("3.6.1.Final".into()),
        }];
        if !connectors_only {
            out.push(PluginInfo {
                class: "io.debezium.transforms.outbox.EventRouter".into(),
                kind: "transformation",
                version: Some("3.6.1.Final".into()),
            });
        }
        out
    }
    async fn put_config(
        &self,
        name: &str,
        config: ConfigMap,
        allow_replace: bool,
    ) -> Result<Created<ConnectorInfo>, ApiError> {
        let mut m = self
            .conns
            .lock()
            .map_err(|_| ApiError::new(500, "poisoned"))?;
        let existed = m.contains_key(name);
        if existed && !allow_replace {
            return Err(ApiError::new(
                409,
                format!("Connector {name} already exists"),
            ));
        }
        let c = Conn {
            config,
            state: State::Running,
        };
        m.insert(name.into(), c.clone());
        Ok(Created {
            created: !existed,
            value: Fake::info(name, &c, existed),
        })
    }
    async fn patch_config(
        &self,
        name: &str,
        patch: BTreeMap<String, Option<String>>,
    ) -> Result<ConnectorInfo, ApiError> {
        let mut m = self
            .conns
            .lock()
            .map_err(|_| ApiError::new(500, "poisoned"))?;
        let c = m
            .get_mut(name)
            .ok_or_else(|| ApiError::connector_not_found(name))?;
        for (k, v) in patch {
            match v {
                Some(v) => c.config.insert(k, v),
                None => c.config.remove(&k),
            };
        }
        Ok(Fake::info(name, c, true))
    }
    async fn validate(
        &self,
        plugin: &str,
        _config: ConfigMap,
    ) -> Result<serde_json::Value, ApiError> {
        Ok(serde_json::json!({
            "configs": [
                {"value": {"visible": true, "errors": [], "name": "name", "value": null, "recommended_values": []},
                 "definition": {"order": 1, "name": "name", "type": "STRING", "required": true, "default_value": null,
                   "importance": "HIGH", "documentation": "Globally unique name to use for this connector.",
                   "group": "Common", "width": "MEDIUM", "display_name": "Connector name", "dependents": []}},
                {"value": {"visible": true, "errors": [], "name": "topic.prefix", "value": null, "recommended_values": []},
                 "definition": {"order": 1, "name": "topic.prefix", "type": "STRING", "required": true, "default_value": null,
                   "importance": "HIGH", "documentation": "Prefix.", "group": "Connector", "width": "MEDIUM",
                   "display_name": "Topic prefix", "dependents": []}}
            ],
            "groups": ["Common", "Connector"],
            "error_count": 1,
            "name": plugin,
        }))
    }
    async fn delete_connector(&self, name: &str) -> Result<(), ApiError> {
        let mut m = self
            .conns
            .lock()
            .map_err(|_| ApiError::new(500, "poisoned"))?;
        m.remove(name)
            .map(|_| ())
            .ok_or_else(|| ApiError::connector_not_found(name))
    }
    async fn restart_connector(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<Option<ConnectorStateInfo>, ApiError> {
        self.get(name)?;
        if !include_tasks && !only_failed {
            return Ok(None);
        }
        let mut s = self.connector_status(name)?;
        if !only_failed {
            s.connector.state = State::Restarting;
            for t in &mut s.tasks {
                t.info.state = State::Restarting;
            }
        }
        Ok(Some(s))
    }
    async fn restart_task(&self, name: &str, task: i32) -> Result<(), ApiError> {
        self.get(name)?;
        if task == 0 {
            Ok(())
        } else {
            Err(ApiError::new(404, format!("Unknown task: {name}-{task}")))
        }
    }
    async fn pause(&self, name: &str) -> Result<(), ApiError> {
        self.set_state(name, State::Paused)
    }
    async fn resume(&self, name: &str) -> Result<(), ApiError> {
        self.set_state(name, State::Running)
    }
    async fn stop(&self, name: &str) -> Result<(), ApiError> {
        self.set_state(name, State::Stopped)
    }
    async fn reset_active_topics(&self, name: &str) -> Result<(), ApiError> {
        self.get(name).map(|_| ())
    }
    async fn offsets(&self, name: &str) -> Result<ConnectorOffsets, ApiError> {
        self.get(name)?;
        let partition = serde_json::json!({"server": "refdist1"});
        let offset = serde_json::json!({"lsn": 139769848});
        Ok(ConnectorOffsets {
            offsets: vec![PartitionOffset {
                partition: partition.as_object().cloned().unwrap_or_default(),
                offset: offset.as_object().cloned(),
            }],
        })
    }
    async fn alter_offsets(&self, name: &str, _o: ConnectorOffsets) -> Result<String, ApiError> {
        self.get(name)?;
        Ok(ALTERED.into())
    }
    async fn reset_offsets(&self, name: &str) -> Result<String, ApiError> {
        self.get(name)?;
        Ok("reset".into())
    }
}

/// Connect's message after altering offsets.
const ALTERED: &str = "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses.";

/// A response as read off the socket.
#[derive(Debug)]
struct Resp {
    /// The status code.
    status: u16,
    /// Headers, names lower-cased.
    headers: Vec<(String, String)>,
    /// The body.
    body: String,
}

impl Resp {
    /// A header's value.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request on `io` and reads the whole response.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Resp {
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:31666\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    io.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let _ = io.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A server on a free loopback port with `config`.
async fn start(mut config: RestConfig) -> (SocketAddr, Arc<Fake>, watch::Sender<bool>) {
    if config.listeners.iter().all(|l| l.port != 0) {
        config.listeners = vec![Listener {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port: 0,
        }];
    }
    let fake = Arc::new(Fake::default());
    let (tx, rx) = watch::channel(false);
    let addrs = serve(config, Arc::clone(&fake), rx).await.expect("serve");
    (addrs[0], fake, tx)
}

/// A plain HTTP request.
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Resp {
    call_h(addr, method, path, &[], body).await
}

/// A plain HTTP request with headers.
async fn call_h(
    addr: SocketAddr,
    method: &str,
    path: &str,
    h: &[(&str, &str)],
    body: Option<&str>,
) -> Resp {
    let s = TcpStream::connect(addr).await.expect("connect");
    exchange(s, method, path, h, body).await
}

/// The n1 create request of the transcript (step 5).
const N1_CREATE: &str = r#"{"name": "n1", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "plugin.name": "pgoutput", "database.hostname": "127.0.0.1", "database.port": "26436", "database.user": "postgres", "database.password": "secret-pw", "database.dbname": "refdist", "topic.prefix": "refdist1", "table.include.list": "public.outbox", "slot.name": "refdist_n1", "publication.name": "refdist_n1_pub", "publication.autocreate.mode": "filtered", "tasks.max": "1", "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.route.topic.replacement": "refdist.${routedByValue}"}}"#;

/// Step 5's answer.
const N1_CREATED: &str = r#"{"name":"n1","config":{"connector.class":"io.debezium.connector.postgresql.PostgresConnector","plugin.name":"pgoutput","database.hostname":"127.0.0.1","database.port":"26436","database.user":"postgres","database.password":"secret-pw","database.dbname":"refdist","topic.prefix":"refdist1","table.include.list":"public.outbox","slot.name":"refdist_n1","publication.name":"refdist_n1_pub","publication.autocreate.mode":"filtered","tasks.max":"1","transforms":"outbox","transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter","transforms.outbox.route.topic.replacement":"refdist.${routedByValue}","name":"n1"},"tasks":[],"type":"source"}"#;

/// Step 19's answer (the stored config, in `HashMap` order).
const N1_CONFIG: &str = r#"{"connector.class":"io.debezium.connector.postgresql.PostgresConnector","publication.autocreate.mode":"filtered","database.user":"postgres","database.dbname":"refdist","transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter","slot.name":"refdist_n1","tasks.max":"1","publication.name":"refdist_n1_pub","transforms":"outbox","plugin.name":"pgoutput","database.port":"26436","topic.prefix":"refdist1","database.hostname":"127.0.0.1","transforms.outbox.route.topic.replacement":"refdist.${routedByValue}","database.password":"secret-pw","name":"n1","table.include.list":"public.outbox"}"#;

/// Step 9's answer.
const N1_STATUS: &str = r#"{"name":"n1","connector":{"state":"RUNNING","worker_id":"127.0.0.1:31666","version":"3.6.1.Final"},"tasks":[{"id":0,"state":"RUNNING","worker_id":"127.0.0.1:31666","version":"3.6.1.Final"}],"type":"source"}"#;

#[tokio::test]
async fn root_plugins_and_empty_list() {
    let (a, _f, _tx) = start(RestConfig::default()).await;
    let r = call(a, "GET", "/", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("content-length"), Some("91"));
    assert_eq!(
        r.body,
        r#"{"version":"4.1.1","commit":"be816b82d25370ce","kafka_cluster_id":"kcbyUfdmA1BEd4OTo1-8sA"}"#
    );
    assert_eq!(call(a, "GET", "/connectors", None).await.body, "[]");
    assert_eq!(call(a, "GET", "/connectors/", None).await.body, "[]");
    assert_eq!(
        call(a, "GET", "/connector-plugins", None).await.body,
        r#"[{"class":"io.debezium.connector.postgresql.PostgresConnector","type":"source","version":"3.6.1.Final"}]"#
    );
    let all = call(a, "GET", "/connector-plugins?connectorsOnly=false", None)
        .await
        .body;
    assert!(all.contains(r#"{"class":"io.debezium.transforms.outbox.EventRouter","type":"transformation","version":"3.6.1.Final"}"#));
    let r = call(a, "GET", "/health", None).await;
    assert_eq!(
        r.body,
        r#"{"status":"healthy","message":"Worker has completed startup and is ready to handle requests."}"#
    );
    assert_eq!(
        call(a, "GET", "/connectors?expand=status", None).await.body,
        "{}"
    );
}

#[tokio::test]
async fn create_read_and_config_order_as_connect() {
    let (a, _f, _tx) = start(RestConfig::default()).await;
    let r = call(a, "POST", "/connectors", Some(N1_CREATE)).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body, N1_CREATED);
    assert_eq!(
        r.header("location"),
        Some("http://127.0.0.1:31666/connectors/n1")
    );
    assert_eq!(call(a, "GET", "/connectors", None).await.body, r#"["n1"]"#);
    assert_eq!(
        call(a, "GET", "/connectors/n1/config", None).await.body,
        N1_CONFIG
    );
    let info = call(a, "GET", "/connectors/n1", None).await.body;
    assert_eq!(
        info,
        format!(
            r#"{{"name":"n1","config":{N1_CONFIG},"tasks":[{{"connector":"n1","task":0}}],"type":"source"}}"#
        )
    );
    let tasks = call(a, "GET", "/connectors/n1/tasks", None).await.body;
    assert_eq!(
        tasks,
        r#"[{"id":{"connector":"n1","task":0},"config":{"connector.class":"io.debezium.connector.postgresql.PostgresConnector","publication.autocreate.mode":"filtered","database.user":"postgres","database.dbname":"refdist","transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter","slot.name":"refdist_n1","tasks.max":"1","publication.name":"refdist_n1_pub","transforms":"outbox","plugin.name":"pgoutput","database.port":"26436","topic.prefix":"refdist1","task.class":"io.debezium.connector.postgresql.PostgresConnectorTask","database.hostname":"127.0.0.1","transforms.outbox.route.topic.replacement":"refdist.${routedByValue}","database.password":"secret-pw","name":"n1","table.include.list":"public.outbox"}}]"#
    );
    assert_eq!(
        call(a, "GET", "/connectors/n1/status", None).await.body,
        N1_STATUS
    );
    assert_eq!(
        call(a, "GET", "/connectors?expand=status", None).await.body,
        format!(r#"{{"n1":{{"status":{N1_STATUS}}}}}"#)
    );
    let both = call(a, "GET", "/connectors?expand=info&expand=status", None)
        .await
        .body;
    assert!(both.starts_with(r#"{"n1":{"info":{"name":"n1""#), "{both}");
    let both = call(a, "GET", "/connectors?expand=status&expand=info", None)
        .await
        .body;
    assert!(both.starts_with(r#"{"n1":{"status":{"#), "{both}");
    assert_eq!(
        call(a, "GET", "/connectors?expand=nonsense", None)
            .await
            .body,
        r#"{"n1":{}}"#
    );
    assert_eq!(
        call(a, "GET", "/connectors/n1/tasks/0/status", None)
            .await
            .body,
        r#"{"id":0,"state":"RUNNING","worker_id":"127.0.0.1:31666","version":"3.6.1.Final"}"#
    );
    assert_eq!(
        call(a, "GET", "/connectors/n1/topics", None).await.body,
        r#"{"n1":{"topics":[]}}"#
    );
    let r = call(a, "PUT", "/connectors/n1/topics/reset", None).await;
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-length")),
        (202, "", Some("0"))
    );
}

#[tokio::test]
async fn create_errors_as_connect() {
    let (a, _f, _tx) = start(RestConfig::default()).await;
    call(a, "POST", "/connectors", Some(N1_CREATE)).await;
    let r = call(a, "POST", "/connectors", Some(N1_CREATE)).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            409,
            r#"{"error_code":409,"message":"Connector n1 already exists"}"#
        )
    );
    let r = call(a, "POST", "/connectors", Some(r#"{"name":"n3"}"#)).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            500,
            r#"{"error_code":500,"message":"Cannot invoke \"java.util.Map.get(Object)\" because \"connectorConfig\" is null"}"#
        )
    );
    let r = call(a, "POST", "/connectors", Some(r#"{"name":"n3","config":{"#)).await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.body,
        r#"{"error_code":500,"message":"Unexpected end-of-input: expected close marker for Object (start marker at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 23])\n at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 24] (through reference chain: org.apache.kafka.connect.runtime.rest.entities.CreateConnectorRequest[\"config\"])"}"#
    );
    let r = call(
        a,
        "POST",
        "/connectors",
        Some(r#"{"name":"n3","config":{"name":"n4","connector.class":"x"}}"#),
    )
    .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            400,
            r#"{"error_code":400,"message":"Connector name configuration (n4) doesn't match connector name in the URL (n3)"}"#
        )
    );
    let r = call(a, "POST", "/connectors", Some("")).await;
    assert_eq!(
        r.body,
        r#"{"error_code":500,"message":"Cannot invoke \"org.apache.kafka.connect.runtime.rest.entities.CreateConnectorRequest.name()\" because \"createRequest\" is null"}"#
    );
    let r = call_h(
        a,
        "POST",
        "/connectors",
        &[("Content-Type", "text/plain")],
        Some(r#"{"name":"n5","config":{}}"#),
    )
    .await;
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-type")),
        (
            415,
            r#"{"error_code":415,"message":"HTTP 415 Unsupported Media Type"}"#,
            None
        )
    );
    // A name with spaces, trimmed, and its Location encoded.
    let r = call(
        a,
        "POST",
        "/connectors",
        Some(r#"{"name":" my conn ","config":{"a":1}}"#),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.header("location"),
        Some("http://127.0.0.1:31666/connectors/my%20conn")
    );
    assert_eq!(
        r.body,
        r#"{"name":"my conn","config":{"a":"1","name":"my conn"},"tasks":[],"type":"source"}"#
    );
    assert_eq!(
        call(a, "GET", "/connectors/my%20conn/config", None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn not_found_messages() {
    let (a, _f, _tx) = start(RestConfig::default()).await;
    let cases = [
        (
            "/connectors/nope",
            r#"{"error_code":404,"message":"Connector nope not found"}"#,
        ),
        (
            "/connectors/nope/status",
            r#"{"error_code":404,"message":"No status found for connector nope"}"#,
        ),
        (
            "/connectors/nope/config",
            r#"{"error_code":404,"message":"Connector nope not found"}"#,
        ),
        (
            "/connectors/nope/tasks",
            r#"{"error_code":404,"message":"Connector nope not found"}"#,
        ),
        (
            "/connectors/nope/tasks/0/status",
            r#"{"error_code":404,"message":"No status found for task nope-0"}"#,
        ),
    ];
    for (path, body) in cases {
        let r = call(a, "GET", path, None).await;
        assert_eq!(
            (r.status, r.body.as_str(), r.header("content-type")),
            (404, body, Some("application/json")),
            "{path}"
        );
    }
    assert_eq!(
        call(a, "GET", "/connectors/nope/topics", None).await.body,
        r#"{"nope":{"topics":[]}}"#
    );
    let r = call(a, "GET", "/connectors/n1/tasks-config", None).await;
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-type")),
        (
            404,
            r#"{"error_code":404,"message":"HTTP 404 Not Found"}"#,
            None
        )
    );
    let r = call(a, "DELETE", "/connectors", None).await;
    assert_eq!(
        (
            r.status,
            r.body.as_str(),
            r.header("content-type"),
            r.header("allow")
        ),
        (
            405,
            r#"{"error_code":405,"message":"HTTP 405 Method Not Allowed"}"#,
            None,
            None
        )
    );
    let r = call(a, "PUT", "/connectors", Some("{}")).await;
    assert_eq!(r.status, 405);
    let r = call_h(a, "GET", "/connectors", &[("Accept", "text/plain")], None).await;
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-type")),
        (
            406,
            r#"{"error_code":406,"message":"HTTP 406 Not Acceptable"}"#,
            None
        )
    );
    assert_eq!(
        call_h(a, "GET", "/nope", &[("Accept", "text/plain")], None)
            .await
            .status,
        404
    );
    assert_eq!(
        call_h(
            a,
            "GET",
            "/connectors",
            &[("Accept", "application/xml")],
            None
        )
        .await
        .status,
        406
    );
    let r = call(a, "HEAD", "/connectors", None).await;
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-length")),
        (200, "", Some("2"))
    );
    let r = call(a, "OPTIONS", "/connectors", None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "HEAD, POST, GET, OPTIONS")
    );
    assert_eq!(
        (r.header("allow"), r.header("content-type")),
        (Some("HEAD,POST,GET,OPTIONS"), Some("text/plain"))
    );
    let r = call(a, "GET", "/connectors/n1/tasks/x/status", None).await;
    assert_eq!(r.status, 404);
}

/// Step 48's PUT (an update), then step 57's PATCH.
#[tokio::test]
async fn update_and_patch_as_connect() {
    let (a, _f, _tx) = start(RestConfig::default()).await;
    call(a, "POST", "/connectors", Some(N1_CREATE)).await;
    let put = r#"{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "plugin.name": "pgoutput", "database.hostname": "127.0.0.1", "database.port": "26436", "database.user": "postgres", "database.password": "secret-pw", "database.dbname": "refdist", "topic.prefix": "refdist1", "table.include.list": "public.outbox", "slot.name": "refdist_n1", "publication.name": "refdist_n1_pub", "publication.autocreate.mode": "filtered", "tasks.max": "1", "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.route.topic.replacement": "refdist.${routedByValue}", "poll.interval.ms": "700"}"#;
    let r = call(a, "PUT", "/connectors/n1/config", Some(put)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("location"), None);
    assert_eq!(
        r.body,
        r#"{"name":"n1","config":{"connector.class":"io.debezium.connector.postgresql.PostgresConnector","plugin.name":"pgoutput","database.hostname":"127.0.0.1","database.port":"26436","database.user":"postgres","database.password":"secret-pw","database.dbname":"refdist","topic.prefix":"refdist1","table.include.list":"public.outbox","slot.name":"refdist_n1","publication.name":"refdist_n1_pub","publication.autocreate.mode":"filtered","tasks.max":"1","transforms":"outbox","transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter","transforms.outbox.route.topic.replacement":"refdist.${routedByValue}","poll.interval.ms":"700","name":"n1"},"tasks":[{"connector":"n1","task":0}],"type":"source"}"#
    );
    let r = call(
        a,
        "PATCH",
        "/connectors/n1/config",
        Some(r#"{"some.key":"v","other":null}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        r#"{"name":"n1","config":{"connector.class":"io.debezium.connector.postgresql.PostgresConnector","publication.autocreate.mode":"filtered","database.user":"postgres","database.dbname":"refdist","transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter","slot.name":"refdist_n1","some.key":"v","tasks.max":"1","publication.name":"refdist_n1_pub","transforms":"outbox","plugin.name":"pgoutput","database.port":"26436","topic.prefix":"refdist1","database.hostname":"127.0.0.1","transforms.outbox.route.topic.replacement":"refdist.${routedByValue}","database.password":"secret-pw","poll.interval.ms":"700","name":"n1","table.include.list":"public.outbox"},"tasks":[{"connector":"n1","task":0}],"type":"source"}"#
    );
    let r = call(
        a,
        "PUT",
        "/connectors/n1/config",
        Some(r#"{"name":"other"}"#),
    )
    .await;
    assert_eq!(
        r.body,
        r#"{"error_code":400,"message":"Connector name configuration (other) doesn't match connector name in the URL (n1)"}"#
    );
    let r = call(a, "PATCH", "/connectors/nope/config", Some(r#"{"a":"b"}"#)).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            404,
            r#"{"error_code":404,"message":"Connector nope not found"}"#
        )
    );
    let r = call(a, "PUT", "/connectors/n2/config", Some(r#"{"a":"b"}"#)).await;
    assert_eq!(
        (r.status, r.header("location")),
        (201, Some("http://127.0.0.1:31666/connectors/n2"))
    );
}

#[tokio::test]
async fn lifecycle_codes_as_connect() {
    let (a, _f, _tx) = start(RestConfig::default()).await;
    call(a, "POST", "/connectors", Some(N1_CREATE)).await;
    let r = call(a, "PUT", "/connectors/n1/pause", None).await;
    assert_eq!(
        (r.status, r.body.as_str(), r.header("content-type")),
        (202, "", None)
    );
    assert!(call(a, "GET", "/connectors/n1/status", None)
        .await
        .body
        .contains(r#"{"state":"PAUSED","worker_id""#));
    assert_eq!(
        call(a, "PUT", "/connectors/n1/resume", None).await.status,
        202
    );
    assert_eq!(
        call(a, "PUT", "/connectors/nope/pause", None).await.status,
        404
    );
    assert_eq!(
        call(a, "POST", "/connectors/n1/restart", None).await.status,
        204
    );
    assert_eq!(
        call(a, "POST", "/connectors/n1/restart?includeTasks=yes", None)
            .await
            .status,
        204
    );
    let r = call(
        a,
        "POST",
        "/connectors/n1/restart?includeTasks=true&onlyFailed=true",
        None,
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (202, N1_STATUS));
    let r = call(a, "POST", "/connectors/n1/restart?includeTasks=true", None).await;
    assert_eq!(
        r.body,
        r#"{"name":"n1","connector":{"state":"RESTARTING","worker_id":"127.0.0.1:31666","version":"3.6.1.Final"},"tasks":[{"id":0,"state":"RESTARTING","worker_id":"127.0.0.1:31666","version":"3.6.1.Final"}],"type":"source"}"#
    );
    assert_eq!(
        call(a, "POST", "/connectors/n1/tasks/0/restart", None)
            .await
            .status,
        204
    );
    let r = call(a, "POST", "/connectors/n1/tasks/5/restart", None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (404, r#"{"error_code":404,"message":"Unknown task: n1-5"}"#)
    );
    assert_eq!(
        call(a, "PUT", "/connectors/n1/stop", None).await.status,
        204
    );
    let r = call(a, "GET", "/connectors/n1/offsets", None).await;
    assert_eq!(
        r.body,
        r#"{"offsets":[{"partition":{"server":"refdist1"},"offset":{"lsn":139769848}}]}"#
    );
    let r = call(
        a,
        "PATCH",
        "/connectors/n1/offsets",
        Some(r#"{"offsets":[{"partition":{"server":"refdist1"}}]}"#),
    )
    .await;
    assert_eq!(
        (r.status, r.body.clone()),
        (200, format!(r#"{{"message":"{ALTERED}"}}"#))
    );
    for body in ["{}", r#"{"offsets":[]}"#] {
        let r = call(a, "PATCH", "/connectors/n1/offsets", Some(body)).await;
        assert_eq!(
            r.body,
            r#"{"error_code":400,"message":"Partitions / offsets need to be provided for an alter offsets request"}"#
        );
    }
    let r = call(
        a,
        "PATCH",
        "/connectors/n1/offsets",
        Some(r#"{"offsets":[{"#),
    )
    .await;
    assert_eq!(
        r.body,
        r#"{"error_code":500,"message":"Unexpected end-of-input: expected close marker for Object (start marker at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 13])\n at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 14] (through reference chain: org.apache.kafka.connect.runtime.rest.entities.ConnectorOffsets[\"offsets\"]->java.util.ArrayList[0])"}"#
    );
    assert_eq!(
        call(a, "DELETE", "/connectors/n1/offsets", None).await.body,
        r#"{"message":"reset"}"#
    );
    assert_eq!(call(a, "DELETE", "/connectors/n1", None).await.status, 204);
    let r = call(a, "DELETE", "/connectors/n1", None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            404,
            r#"{"error_code":404,"message":"Connector n1 not found"}"#
        )
    );
}

#[tokio::test]
async fn plugins_validate_loggers_topic_tracking() {
    let config = RestConfig {
        topic_tracking_reset: false,
        ..RestConfig::default()
    };
    let (a, _f, _tx) = start(config).await;
    let r = call(
        a,
        "PUT",
        "/connector-plugins/PostgresConnector/config/validate",
        Some(r#"{"connector.class":"io.debezium.connector.postgresql.PostgresConnector"}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with(r#"{"name":"PostgresConnector","error_count":1,"groups":["Common","Connector"],"configs":[{"definition":{"name":"name","type":"STRING","required":true,"default_value":null,"importance":"HIGH","documentation":"Globally unique name to use for this connector.","group":"Common","width":"MEDIUM","display_name":"Connector name","dependents":[],"order":1},"value":{"name":"name","value":null,"recommended_values":[],"errors":[],"visible":true}}"#), "{}", r.body);
    let r = call(
        a,
        "PUT",
        "/connector-plugins/Other/config/validate",
        Some(r#"{"connector.class":"com.x.Mine"}"#),
    )
    .await;
    assert_eq!(
        r.body,
        r#"{"error_code":400,"message":"Included connector type com.x.Mine does not match request type Other"}"#
    );
    let r = call(
        a,
        "GET",
        "/connector-plugins/PostgresConnector/config",
        None,
    )
    .await;
    assert!(
        r.body.starts_with(r#"[{"name":"topic.prefix""#),
        "{}",
        r.body
    );
    let r = call(a, "GET", "/connector-plugins/Nope/config", None).await;
    assert_eq!(
        r.body,
        r#"{"error_code":404,"message":"Unknown plugin Nope."}"#
    );
    assert_eq!(
        call(a, "GET", "/admin/loggers", None).await.body,
        r#"{"root":{"level":"INFO","last_modified":null}}"#
    );
    assert_eq!(
        call(a, "GET", "/admin/loggers/root", None).await.body,
        r#"{"level":"INFO","last_modified":null}"#
    );
    let r = call(a, "PUT", "/connectors/n1/topics/reset", None).await;
    assert_eq!(
        r.body,
        r#"{"error_code":403,"message":"Topic tracking reset is disabled."}"#
    );
}

/// A configuration with basic auth for `alice`.
fn with_auth() -> RestConfig {
    let users = [("alice".to_owned(), Secret::new("s3cret"))]
        .into_iter()
        .collect();
    RestConfig {
        basic_auth: Some(BasicAuth { users }),
        ..RestConfig::default()
    }
}

#[tokio::test]
async fn basic_auth_as_the_extension() {
    let (a, _f, _tx) = start(with_auth()).await;
    let r = call(a, "GET", "/connectors", None).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (401, "User cannot access the resource.")
    );
    // YWxpY2U6czNjcmV0 = alice:s3cret, YWxpY2U6d3Jvbmc= = alice:wrong
    let ok = call_h(
        a,
        "GET",
        "/connectors",
        &[("Authorization", "Basic YWxpY2U6czNjcmV0")],
        None,
    )
    .await;
    assert_eq!((ok.status, ok.body.as_str()), (200, "[]"));
    let bad = call_h(
        a,
        "GET",
        "/connectors",
        &[("Authorization", "Basic YWxpY2U6d3Jvbmc=")],
        None,
    )
    .await;
    assert_eq!(bad.status, 401);
    // Unknown paths are 404 before authentication; the internal task
    // endpoint is let through.
    assert_eq!(call(a, "GET", "/nope", None).await.status, 404);
    assert_eq!(
        call(a, "POST", "/connectors/n1/tasks", Some("[]"))
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn cors_as_jetty() {
    let cors = Cors {
        origins: vec!["https://ui\\.example\\.com".into()],
        methods: vec!["GET".into(), "PUT".into()],
    };
    let (a, _f, _tx) = start(RestConfig {
        cors: Some(cors),
        ..RestConfig::default()
    })
    .await;
    let r = call_h(a, "GET", "/", &[("Origin", "https://UI.example.com")], None).await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://UI.example.com")
    );
    assert_eq!(r.header("vary"), Some("Origin"));
    let r = call_h(
        a,
        "GET",
        "/",
        &[("Origin", "https://evil.example.com")],
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.header("access-control-allow-origin")),
        (200, None)
    );
    let r = call_h(
        a,
        "OPTIONS",
        "/connectors",
        &[
            ("Origin", "https://ui.example.com"),
            ("Access-Control-Request-Method", "PUT"),
        ],
        None,
    )
    .await;
    assert_eq!(r.header("access-control-allow-methods"), Some("GET,PUT"));
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("Content-Type")
    );
    assert_eq!(r.header("access-control-max-age"), Some("60"));
}

/// A self-signed certificate for 127.0.0.1, and its key, as PEM.
fn self_signed() -> (Vec<u8>, Vec<u8>) {
    use openssl::{asn1::Asn1Time, bn::BigNum, hash::MessageDigest, pkey::PKey, rsa::Rsa, x509};
    let key = PKey::from_rsa(Rsa::generate(2048).expect("rsa")).expect("key");
    let mut name = x509::X509NameBuilder::new().expect("name");
    name.append_entry_by_text("CN", "127.0.0.1").expect("cn");
    let name = name.build();
    let mut b = x509::X509Builder::new().expect("builder");
    b.set_version(2).expect("v");
    b.set_serial_number(
        &BigNum::from_u32(1)
            .and_then(|n| n.to_asn1_integer())
            .expect("serial"),
    )
    .expect("serial");
    b.set_subject_name(&name).expect("subject");
    b.set_issuer_name(&name).expect("issuer");
    b.set_pubkey(&key).expect("pubkey");
    b.set_not_before(&Asn1Time::days_from_now(0).expect("t"))
        .expect("nb");
    b.set_not_after(&Asn1Time::days_from_now(2).expect("t"))
        .expect("na");
    let san = x509::extension::SubjectAlternativeName::new()
        .ip("127.0.0.1")
        .build(&b.x509v3_context(None, None))
        .expect("san");
    b.append_extension(san).expect("ext");
    b.sign(&key, MessageDigest::sha256()).expect("sign");
    let cert = b.build();
    (
        cert.to_pem().expect("pem"),
        key.private_key_to_pem_pkcs8().expect("pem"),
    )
}

#[tokio::test]
async fn https_with_a_verified_certificate() {
    let (cert, key) = self_signed();
    let dir = tempfile::tempdir().expect("tmp");
    let store = dir.path().join("server.pem");
    std::fs::write(&store, [key, cert.clone()].concat()).expect("write");
    let worker: BTreeMap<String, String> = [
        ("listeners", "https://127.0.0.1:0"),
        ("listeners.https.ssl.keystore.type", "PEM"),
        (
            "listeners.https.ssl.keystore.location",
            store.to_str().unwrap_or_default(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = RestConfig::from_worker(&worker, &|_| None).expect("config");
    let (a, _f, _tx) = start(config).await;
    let mut c =
        openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls_client()).expect("c");
    c.cert_store_mut()
        .add_cert(openssl::x509::X509::from_pem(&cert).expect("x509"))
        .expect("add");
    let ssl = c
        .build()
        .configure()
        .expect("cfg")
        .into_ssl("127.0.0.1")
        .expect("ssl");
    let tcp = TcpStream::connect(a).await.expect("connect");
    let mut s = tokio_openssl::SslStream::new(ssl, tcp).expect("stream");
    Pin::new(&mut s)
        .connect()
        .await
        .expect("handshake verifies");
    let r = exchange(s, "GET", "/connectors", &[], None).await;
    assert_eq!((r.status, r.body.as_str()), (200, "[]"));
}

#[test]
fn worker_keys() {
    let w = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let c = RestConfig::from_worker(&w(&[]), &|_| None).expect("default");
    assert_eq!(
        c.listeners,
        vec![Listener {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port: 8083
        }]
    );
    let c = RestConfig::from_worker(
        &w(&[
            ("listeners", "http://:8083, HTTPS://[::1]:8443"),
            ("listeners.https.ssl.keystore.location", "/x"),
        ]),
        &|_| None,
    )
    .expect("two");
    assert_eq!(c.listeners[0].host, "");
    assert_eq!(
        c.listeners[1],
        Listener {
            scheme: Scheme::Https,
            host: "::1".into(),
            port: 8443
        }
    );
    let c = RestConfig::from_worker(
        &w(&[
            ("listeners", "http://h1:8083"),
            ("rest.advertised.host.name", "w1"),
            ("rest.advertised.port", "9000"),
        ]),
        &|_| None,
    )
    .expect("adv");
    assert_eq!(c.worker_id(&[]), "w1:9000");
    assert_eq!(c.advertised_url(&[]), "http://w1:9000/");
    let e = RestConfig::from_worker(&w(&[("listeners", "ftp://h:1")]), &|_| None).expect_err("ftp");
    assert_eq!(
        e.to_string(),
        "listeners: Listener protocol must be either \"http\" or \"https\"."
    );
    let e = RestConfig::from_worker(&w(&[("rest.extension.classes", "com.x.Mine")]), &|_| None)
        .expect_err("ext");
    assert_eq!(e.key, "rest.extension.classes");
    let e = RestConfig::from_worker(
        &w(&[(
            "rest.extension.classes",
            super::config::BASIC_AUTH_EXTENSION,
        )]),
        &|_| None,
    )
    .expect_err("no jaas");
    assert_eq!(e.key, "rest.extension.classes");
    let c = RestConfig::from_worker(
        &w(&[("rest.host.name", "0.0.0.0"), ("rest.port", "8090")]),
        &|_| None,
    )
    .expect("old");
    assert_eq!(c.listeners[0].port, 8090);
}

#[test]
fn basic_auth_from_kafka_opts() {
    let dir = tempfile::tempdir().expect("tmp");
    let creds = dir.path().join("creds.properties");
    std::fs::write(&creds, "alice: s3cret\nbob=pw\n").expect("creds");
    let jaas = dir.path().join("jaas.conf");
    std::fs::write(
        &jaas,
        format!("KafkaConnect {{\n org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n file=\"{}\";\n}};\n", creds.display()),
    )
    .expect("jaas");
    let opts = format!("-Djava.security.auth.login.config={}", jaas.display());
    let worker: BTreeMap<String, String> = [(
        "rest.extension.classes".to_owned(),
        super::config::BASIC_AUTH_EXTENSION.to_owned(),
    )]
    .into_iter()
    .collect();
    let env = |k: &str| (k == "KAFKA_OPTS").then(|| opts.clone());
    let c = RestConfig::from_worker(&worker, &env).expect("config");
    let auth = c.basic_auth.expect("auth");
    assert_eq!(
        auth.users.keys().cloned().collect::<Vec<_>>(),
        vec!["alice".to_owned(), "bob".to_owned()]
    );
    let debug = format!("{auth:?}");
    assert!(
        !debug.contains("s3cret") && !debug.contains("\"pw\""),
        "{debug}"
    );
}
