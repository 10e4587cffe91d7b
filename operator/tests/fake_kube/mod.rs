//! An in-memory Kubernetes API server that *answers*: a small stateful
//! stand-in for kube-apiserver (none can run here), for tests where a
//! scripted mock (`kube_mock`) would have to predict every request.
//!
//! It keeps objects by (group/version, plural, namespace, name) and implements
//! what the operator and kube-runtime use: get, list and watch (label and
//! field selectors, resourceVersion replay), create (409 AlreadyExists, 404
//! for a missing namespace, 422 for an invalid name), replace (409 on a stale
//! resourceVersion), patch (server-side apply, merge, strategic merge as
//! merge, JSON patch), delete with finalizers and deletionTimestamp, owner
//! reference garbage collection, the `status` subresource (writes to the main
//! resource keep the stored status; a no-op write changes nothing and sends no
//! watch event, as the real server does), and pod logs set by the test.
//!
//! The same axum app serves two ways: as a tower service for an in-process
//! `kube::Client` ([`FakeKube::client`]), and over HTTP on loopback for a real
//! `sless-operator --backend kube` process ([`FakeKube::serve`] +
//! [`FakeKube::kubeconfig`]). The test plays kubelet and kaniko by writing
//! status with [`FakeKube::set_status`].

#![allow(dead_code)]

pub mod operator;
pub mod rbac;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// Where an object lives: `api` is `v1` for the core group, else `group/version`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// `v1` or `group/version`.
    pub api: String,
    /// Resource plural, e.g. `deployments`.
    pub plural: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl Key {
    /// A key from its parts.
    pub fn new(api: &str, plural: &str, namespace: &str, name: &str) -> Key {
        Key {
            api: api.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Event {
    rv: u64,
    key: Key,
    kind: &'static str,
    object: Value,
}

#[derive(Default)]
struct Store {
    rv: u64,
    uid: u64,
    objects: BTreeMap<Key, Value>,
    history: Vec<Event>,
    logs: HashMap<(String, String), String>,
    requests: Vec<String>,
}

struct Shared {
    store: Mutex<Store>,
    events: broadcast::Sender<Event>,
}

/// The fake API server; clones share one state.
#[derive(Clone)]
pub struct FakeKube {
    shared: Arc<Shared>,
}

/// One API request in RBAC terms.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiCall {
    /// API group (`""` for core).
    pub group: String,
    /// `plural` or `plural/subresource`.
    pub resource: String,
    /// RBAC verb.
    pub verb: String,
    /// Namespace (`""` for cluster-scoped or all-namespace requests).
    pub namespace: String,
    /// Object name (`""` for collections).
    pub name: String,
}

/// The parsed target of a request path.
#[derive(Debug)]
struct Target {
    api: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

const CLUSTER_SCOPED: &[&str] = &["namespaces", "nodes", "customresourcedefinitions"];

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return None,
    };
    let owned = |s: Option<&&str>| s.map(|s| s.to_string());
    match rest {
        ["namespaces", ns, plural, tail @ ..] => Some(Target {
            api,
            plural: plural.to_string(),
            namespace: Some(ns.to_string()),
            name: owned(tail.first()),
            sub: owned(tail.get(1)),
        }),
        [plural, tail @ ..] => Some(Target {
            api,
            plural: plural.to_string(),
            namespace: None,
            name: owned(tail.first()),
            sub: owned(tail.get(1)),
        }),
        [] => None,
    }
}

fn kind_of(plural: &str) -> String {
    match plural {
        "functions" => "Function",
        "triggers" => "Trigger",
        "functionjobs" => "FunctionJob",
        "services" => "Service",
        "deployments" => "Deployment",
        "jobs" => "Job",
        "cronjobs" => "CronJob",
        "ingresses" => "Ingress",
        "networkpolicies" => "NetworkPolicy",
        "secrets" => "Secret",
        "namespaces" => "Namespace",
        "pods" => "Pod",
        "events" => "Event",
        "leases" => "Lease",
        "configmaps" => "ConfigMap",
        other => other,
    }
    .to_string()
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A Kubernetes `Status` failure answer.
fn failure(code: u16, reason: &str, message: String) -> Response {
    json_response(
        code,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code
        }),
    )
}

fn json_response(code: u16, body: &Value) -> Response {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
        .unwrap_or_default()
}

fn not_found(t: &Target, name: &str) -> Response {
    failure(404, "NotFound", format!("{} {name:?} not found", t.plural))
}

/// A DNS-1123 subdomain, what the API server requires of most names.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Label selector terms: `k=v`, `k==v`, `k!=v`, `k`, `!k`.
fn labels_match(selector: &str, obj: &Value) -> bool {
    let labels = &obj["metadata"]["labels"];
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            if let Some((k, v)) = term.split_once("!=") {
                labels[k.trim()].as_str() != Some(v.trim())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                labels[k.trim()].as_str() == Some(v.trim())
            } else if let Some(k) = term.strip_prefix('!') {
                labels.get(k).is_none()
            } else {
                labels.get(term).is_some()
            }
        })
}

/// Field selector terms on `metadata.name` and `metadata.namespace`.
fn fields_match(selector: &str, obj: &Value) -> bool {
    selector
        .split(',')
        .filter(|t| !t.is_empty())
        .all(|term| match term.split_once('=') {
            Some((field, v)) => {
                let v = v.trim_start_matches('=');
                let path: Vec<&str> = field.split('.').collect();
                let mut cur = obj;
                for p in path {
                    cur = &cur[p];
                }
                cur.as_str() == Some(v)
            }
            None => true,
        })
}

/// RFC 7386 merge, except that `null` in `patch` deletes only for merge
/// patches (`delete_nulls`); arrays are replaced.
fn merge(target: &mut Value, patch: &Value, delete_nulls: bool) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() && delete_nulls {
                    t.remove(k);
                } else if v.is_object() {
                    let slot = t.entry(k.clone()).or_insert(Value::Null);
                    if !slot.is_object() {
                        *slot = json!({});
                    }
                    merge(slot, v, delete_nulls);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

struct Query {
    label_selector: String,
    field_selector: String,
    watch: bool,
    resource_version: Option<u64>,
    timeout: Duration,
}

fn parse_query(uri: &Uri) -> Query {
    let mut q = Query {
        label_selector: String::new(),
        field_selector: String::new(),
        watch: false,
        resource_version: None,
        timeout: Duration::from_secs(290),
    };
    for (k, v) in form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "labelSelector" => q.label_selector = v.into_owned(),
            "fieldSelector" => q.field_selector = v.into_owned(),
            "watch" => q.watch = v == "true" || v == "1",
            "resourceVersion" => q.resource_version = v.parse().ok().filter(|rv| *rv > 0),
            "timeoutSeconds" => {
                if let Ok(s) = v.parse() {
                    q.timeout = Duration::from_secs(s);
                }
            }
            _ => {}
        }
    }
    q
}

/// Which objects a list, watch or deletecollection is about.
#[derive(Clone)]
struct Selection {
    api: String,
    plural: String,
    namespace: Option<String>,
    labels: String,
    fields: String,
}

impl Selection {
    fn new(t: &Target, q: &Query) -> Selection {
        Selection {
            api: t.api.clone(),
            plural: t.plural.clone(),
            namespace: t.namespace.clone(),
            labels: q.label_selector.clone(),
            fields: q.field_selector.clone(),
        }
    }

    fn matches(&self, k: &Key, o: &Value) -> bool {
        k.api == self.api
            && k.plural == self.plural
            && self.namespace.as_ref().is_none_or(|n| &k.namespace == n)
            && labels_match(&self.labels, o)
            && fields_match(&self.fields, o)
    }
}

impl Default for FakeKube {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeKube {
    /// An empty API server (no namespaces).
    pub fn new() -> FakeKube {
        let (events, _) = broadcast::channel(4096);
        FakeKube {
            shared: Arc::new(Shared {
                store: Mutex::new(Store::default()),
                events,
            }),
        }
    }

    /// The axum app answering the Kubernetes API.
    pub fn router(&self) -> Router {
        Router::new().fallback(handle).with_state(self.clone())
    }

    /// An in-process client (no network).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// Serves the API on a loopback port; returns `http://127.0.0.1:PORT`.
    ///
    /// The server runs on its own thread and runtime, so it keeps answering
    /// while the test's thread blocks (e.g. waiting for an operator process
    /// to exit, which may be waiting for this server).
    pub async fn serve(&self) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind fake API server");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local addr");
        let app = self.router();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("fake API server runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let _ = axum::serve(listener, app).await;
            });
        });
        format!("http://{addr}")
    }

    /// Writes a kubeconfig for `server` into `dir`; returns its path.
    pub fn kubeconfig(server: &str, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {server}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
             current-context: fake\nusers:\n- name: fake\n  user:\n    token: fake-token\n"
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// Stores `obj` as it is (status included), creating or overwriting it,
    /// and tells watchers. For seeding and for playing kubelet/kaniko.
    pub fn put(&self, api: &str, plural: &str, mut obj: Value) {
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let key = Key::new(api, plural, &ns, &name);
        let mut s = self.lock();
        let existed = s.objects.contains_key(&key);
        s.rv += 1;
        s.uid += 1;
        let rv = s.rv;
        let uid = format!("uid-{}", s.uid);
        let meta = &mut obj["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        if meta.get("uid").is_none() {
            meta["uid"] = json!(uid);
        }
        if meta.get("creationTimestamp").is_none() {
            meta["creationTimestamp"] = json!(now());
        }
        s.objects.insert(key.clone(), obj.clone());
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        self.emit(&mut s, rv, key, kind, obj);
    }

    /// Merges `status` into the stored object's status (what a kubelet or
    /// job controller would write). Panics if the object is missing.
    pub fn set_status(&self, key: &Key, status: Value) {
        let mut obj = self
            .get(key)
            .unwrap_or_else(|| panic!("fake API: no {key:?} to set status on"));
        let mut st = obj.get("status").cloned().unwrap_or(json!({}));
        merge(&mut st, &status, true);
        obj["status"] = st;
        self.put(&key.api, &key.plural, obj);
    }

    /// Deletes an object at once (ignoring finalizers), as `kubectl delete
    /// --force` after finalizers are gone, or a user deleting a child by hand
    /// (children carry no finalizers).
    pub fn remove(&self, key: &Key) -> Option<Value> {
        let mut s = self.lock();
        self.remove_locked(&mut s, key)
    }

    /// The stored object, if any.
    pub fn get(&self, key: &Key) -> Option<Value> {
        self.lock().objects.get(key).cloned()
    }

    /// Every stored object of `api`/`plural` in `namespace` (all when `None`).
    pub fn list(&self, api: &str, plural: &str, namespace: Option<&str>) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|(k, _)| {
                k.api == api && k.plural == plural && namespace.is_none_or(|n| k.namespace == n)
            })
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Sets the log text a pod returns.
    pub fn set_log(&self, namespace: &str, pod: &str, text: &str) {
        self.lock()
            .logs
            .insert((namespace.into(), pod.into()), text.into());
    }

    /// Every request served so far as the RBAC request it is: API group,
    /// resource (`plural` or `plural/subresource`), verb, namespace, name.
    pub fn api_calls(&self) -> Vec<ApiCall> {
        self.requests()
            .iter()
            .filter_map(|r| {
                let (method, uri) = r.split_once(' ')?;
                let uri: Uri = uri.parse().ok()?;
                let t = parse_path(uri.path())?;
                let q = parse_query(&uri);
                let verb = match (method, t.name.is_some()) {
                    ("GET", true) => "get",
                    ("GET", false) if q.watch => "watch",
                    ("GET", false) => "list",
                    ("POST", _) => "create",
                    ("PUT", _) => "update",
                    ("PATCH", _) => "patch",
                    ("DELETE", true) => "delete",
                    ("DELETE", false) => "deletecollection",
                    _ => return None,
                };
                let group = t.api.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
                let resource = match &t.sub {
                    Some(sub) => format!("{}/{sub}", t.plural),
                    None => t.plural.clone(),
                };
                Some(ApiCall {
                    group: group.to_string(),
                    resource,
                    verb: verb.to_string(),
                    namespace: t.namespace.clone().unwrap_or_default(),
                    name: t.name.clone().unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Every request served so far, `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    /// Polls until `f` finds something in the store, panicking with what the
    /// store held after `timeout`.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        f: impl Fn(&FakeKube) -> Option<T>,
    ) -> T {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            if std::time::Instant::now() > deadline {
                let keys: Vec<String> = self
                    .lock()
                    .objects
                    .keys()
                    .map(|k| format!("{}/{} {}/{}", k.api, k.plural, k.namespace, k.name))
                    .collect();
                panic!("fake API: no {what} after {timeout:?}; store holds {keys:#?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.shared
            .store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn emit(&self, s: &mut Store, rv: u64, key: Key, kind: &'static str, object: Value) {
        let ev = Event {
            rv,
            key,
            kind,
            object,
        };
        s.history.push(ev.clone());
        let _ = self.shared.events.send(ev);
    }

    fn remove_locked(&self, s: &mut Store, key: &Key) -> Option<Value> {
        let mut obj = s.objects.remove(key)?;
        s.rv += 1;
        let rv = s.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.emit(s, rv, key.clone(), "DELETED", obj.clone());
        // Garbage collection: dependents (by owner uid) go too, and a
        // namespace takes its contents with it.
        let uid = obj["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let dependents: Vec<Key> = s
            .objects
            .iter()
            .filter(|(k, o)| {
                (key.plural == "namespaces" && key.namespace.is_empty() && k.namespace == key.name)
                    || o["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == json!(uid)))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in dependents {
            self.remove_locked(s, &k);
        }
        Some(obj)
    }

    /// Stores a changed object (or nothing when it did not change), bumping
    /// resourceVersion and generation, and finishing a deletion whose
    /// finalizers are gone.
    fn write(&self, s: &mut Store, key: &Key, old: Option<&Value>, mut new: Value) -> Value {
        if let Some(old) = old {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                    m.remove("managedFields");
                }
                v
            };
            if strip(old) == strip(&new) {
                return old.clone();
            }
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
            new["metadata"]["generation"] = json!(if old["spec"] != new["spec"] {
                generation + 1
            } else {
                generation
            });
        }
        s.rv += 1;
        let rv = s.rv;
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let deleting = new["metadata"].get("deletionTimestamp").is_some();
        let finalizers_left = new["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        s.objects.insert(key.clone(), new.clone());
        let kind = if old.is_some() { "MODIFIED" } else { "ADDED" };
        self.emit(s, rv, key.clone(), kind, new.clone());
        if deleting && !finalizers_left {
            self.remove_locked(s, key);
        }
        new
    }

    fn create(&self, t: &Target, mut obj: Value, apply_name: Option<&str>) -> Response {
        let ns = t.namespace.clone().unwrap_or_default();
        let name = match apply_name {
            Some(n) => n.to_string(),
            None => obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
        };
        let kind = kind_of(&t.plural);
        if !valid_name(&name) {
            return failure(
                422,
                "Invalid",
                format!(
                    "{kind} {name:?} is invalid: metadata.name: Invalid value: {name:?}: \
                     a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                     characters, '-' or '.'"
                ),
            );
        }
        let mut s = self.lock();
        if !ns.is_empty()
            && !s
                .objects
                .contains_key(&Key::new("v1", "namespaces", "", &ns))
        {
            return failure(404, "NotFound", format!("namespaces {ns:?} not found"));
        }
        let key = Key::new(&t.api, &t.plural, &ns, &name);
        if s.objects.contains_key(&key) {
            return failure(
                409,
                "AlreadyExists",
                format!("{} {name:?} already exists", t.plural),
            );
        }
        s.uid += 1;
        let uid = format!("uid-{}", s.uid);
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
            o.entry("apiVersion").or_insert(json!(t.api));
            o.entry("kind").or_insert(json!(kind));
        }
        let meta = &mut obj["metadata"];
        if !meta.is_object() {
            *meta = json!({});
        }
        meta["name"] = json!(name);
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        meta["uid"] = json!(uid);
        meta["generation"] = json!(1);
        meta["creationTimestamp"] = json!(now());
        let stored = self.write(&mut s, &key, None, obj);
        json_response(201, &stored)
    }

    fn list_or_watch(&self, t: &Target, q: Query) -> Response {
        let selection = Selection::new(t, &q);
        let matches = |k: &Key, o: &Value| selection.matches(k, o);
        let s = self.lock();
        if !q.watch {
            let items: Vec<Value> = s
                .objects
                .iter()
                .filter(|(k, o)| matches(k, o))
                .map(|(_, o)| o.clone())
                .collect();
            let api_version = if t.api == "v1" {
                "v1".into()
            } else {
                t.api.clone()
            };
            return json_response(
                200,
                &json!({
                    "apiVersion": api_version,
                    "kind": format!("{}List", kind_of(&t.plural)),
                    "metadata": {"resourceVersion": s.rv.to_string()},
                    "items": items,
                }),
            );
        }
        // Replay what happened after the given version (or the current
        // objects as ADDED), then follow live events, under one lock so
        // nothing falls between the two.
        let backlog: Vec<(u64, &'static str, Value)> = match q.resource_version {
            Some(rv) => s
                .history
                .iter()
                .filter(|e| e.rv > rv && matches(&e.key, &e.object))
                .map(|e| (e.rv, e.kind, e.object.clone()))
                .collect(),
            None => s
                .objects
                .iter()
                .filter(|(k, o)| matches(k, o))
                .map(|(_, o)| (0, "ADDED", o.clone()))
                .collect(),
        };
        let mut live = self.shared.events.subscribe();
        let last = s.rv;
        drop(s);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(256);
        let timeout = q.timeout.min(Duration::from_secs(60));
        tokio::spawn(async move {
            let line = |kind: &str, obj: &Value| {
                let mut b =
                    serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
                b.push(b'\n');
                Bytes::from(b)
            };
            for (_, kind, obj) in backlog {
                if tx.send(Ok(line(kind, &obj))).await.is_err() {
                    return;
                }
            }
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    _ = &mut deadline => return,
                    ev = live.recv() => match ev {
                        Ok(ev) => {
                            let wanted = ev.rv > last && selection.matches(&ev.key, &ev.object);
                            if wanted && tx.send(Ok(line(ev.kind, &ev.object))).await.is_err() {
                                return;
                            }
                        }
                        // Too far behind: end the watch; the client re-lists.
                        Err(_) => return,
                    },
                }
            }
        });
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from_stream(stream))
            .unwrap_or_default()
    }

    fn get_one(&self, t: &Target, name: &str) -> Response {
        let ns = t.namespace.clone().unwrap_or_default();
        let key = Key::new(&t.api, &t.plural, &ns, name);
        let s = self.lock();
        match (s.objects.get(&key), t.sub.as_deref()) {
            (Some(_), Some("log")) => {
                let text = s
                    .logs
                    .get(&(ns, name.to_string()))
                    .cloned()
                    .unwrap_or_default();
                Response::builder()
                    .status(200)
                    .header("content-type", "text/plain")
                    .body(Body::from(text))
                    .unwrap_or_default()
            }
            (Some(o), _) => json_response(200, o),
            (None, _) => not_found(t, name),
        }
    }

    fn replace(&self, t: &Target, name: &str, body: Value) -> Response {
        let ns = t.namespace.clone().unwrap_or_default();
        let key = Key::new(&t.api, &t.plural, &ns, name);
        let mut s = self.lock();
        let Some(old) = s.objects.get(&key).cloned() else {
            return not_found(t, name);
        };
        if let Some(rv) = body["metadata"]["resourceVersion"].as_str()
            && Some(rv) != old["metadata"]["resourceVersion"].as_str()
        {
            return failure(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} {name:?}: the object has been \
                     modified; please apply your changes to the latest version and try again",
                    t.plural
                ),
            );
        }
        let new = self.overlay(&old, body, t.sub.as_deref());
        let stored = self.write(&mut s, &key, Some(&old), new);
        json_response(200, &stored)
    }

    /// The object a write to the main resource or to `/status` produces:
    /// identity fields stay; the main resource keeps the stored status, the
    /// status subresource changes only the status.
    fn overlay(&self, old: &Value, mut new: Value, sub: Option<&str>) -> Value {
        if sub == Some("status") {
            let mut out = old.clone();
            out["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            return out;
        }
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "namespace",
            "name",
        ] {
            match old["metadata"].get(f) {
                Some(v) => new["metadata"][f] = v.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(f);
                    }
                }
            }
        }
        if let Some(generation) = old["metadata"].get("generation") {
            new["metadata"]["generation"] = generation.clone();
        }
        match old.get("status") {
            Some(st) => new["status"] = st.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        new
    }

    fn patch(&self, t: &Target, name: &str, content_type: &str, body: Value) -> Response {
        let ns = t.namespace.clone().unwrap_or_default();
        let key = Key::new(&t.api, &t.plural, &ns, name);
        // One lock for read-modify-write: patches never conflict, as on the
        // real server (they carry no resourceVersion precondition).
        let mut s = self.lock();
        let Some(old) = s.objects.get(&key).cloned() else {
            drop(s);
            if content_type.starts_with("application/apply-patch") && t.sub.is_none() {
                return match self.create(t, body, Some(name)) {
                    r if r.status() == StatusCode::CREATED => {
                        let (mut parts, b) = r.into_parts();
                        parts.status = StatusCode::OK;
                        Response::from_parts(parts, b)
                    }
                    r => r,
                };
            }
            return not_found(t, name);
        };
        let mut patched = old.clone();
        if content_type.starts_with("application/json-patch") {
            let ops: json_patch::Patch = match serde_json::from_value(body) {
                Ok(p) => p,
                Err(e) => return failure(400, "BadRequest", format!("bad JSON patch: {e}")),
            };
            // The API server's JSON patch treats a missing path as null in a
            // `test` (kube-runtime's finalizer helper relies on it).
            let ops = json_patch::Patch(
                ops.0
                    .into_iter()
                    .filter(|op| match op {
                        json_patch::PatchOperation::Test(t) => {
                            !(t.value.is_null() && patched.pointer(t.path.as_str()).is_none())
                        }
                        _ => true,
                    })
                    .collect(),
            );
            if let Err(e) = json_patch::patch(&mut patched, &ops) {
                return failure(422, "Invalid", format!("JSON patch failed: {e}"));
            }
        } else {
            let delete_nulls = content_type.starts_with("application/merge-patch")
                || content_type.starts_with("application/strategic-merge-patch");
            merge(&mut patched, &body, delete_nulls);
        }
        let new = self.overlay(&old, patched, t.sub.as_deref());
        let stored = self.write(&mut s, &key, Some(&old), new);
        json_response(200, &stored)
    }

    /// `deletecollection`: deletes every object the selectors match.
    fn delete_collection(&self, t: &Target, q: Query) -> Response {
        let selection = Selection::new(t, &q);
        let names: Vec<String> = {
            let s = self.lock();
            s.objects
                .iter()
                .filter(|(k, o)| selection.matches(k, o))
                .map(|(k, _)| k.name.clone())
                .collect()
        };
        let mut items = Vec::new();
        for name in names {
            let r = self.delete(t, &name);
            if r.status() == StatusCode::OK {
                items.push(json!({"metadata": {"name": name}}));
            }
        }
        json_response(
            200,
            &json!({"apiVersion": t.api, "kind": format!("{}List", kind_of(&t.plural)),
                    "metadata": {}, "items": items}),
        )
    }

    fn delete(&self, t: &Target, name: &str) -> Response {
        let ns = t.namespace.clone().unwrap_or_default();
        let key = Key::new(&t.api, &t.plural, &ns, name);
        let mut s = self.lock();
        let Some(old) = s.objects.get(&key).cloned() else {
            return not_found(t, name);
        };
        let has_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if old["metadata"].get("deletionTimestamp").is_some() {
                return json_response(200, &old);
            }
            let mut new = old.clone();
            new["metadata"]["deletionTimestamp"] = json!(now());
            let stored = self.write(&mut s, &key, Some(&old), new);
            return json_response(200, &stored);
        }
        match self.remove_locked(&mut s, &key) {
            Some(gone) => json_response(200, &gone),
            None => not_found(t, name),
        }
    }
}

async fn handle(
    State(fake): State<FakeKube>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    fake.lock().requests.push(format!(
        "{method} {}",
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("")
    ));
    let Some(t) = parse_path(uri.path()) else {
        return failure(404, "NotFound", format!("no route {}", uri.path()));
    };
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let json_body = || -> Result<Value, String> {
        serde_json::from_slice(&body).map_err(|e| format!("body is not JSON: {e}"))
    };
    let cluster_scoped = CLUSTER_SCOPED.contains(&t.plural.as_str());
    if !cluster_scoped && t.namespace.is_none() && t.name.is_some() {
        return failure(404, "NotFound", format!("{} is namespaced", t.plural));
    }
    match (method, t.name.clone()) {
        (Method::GET, None) => fake.list_or_watch(&t, parse_query(&uri)),
        (Method::GET, Some(name)) => fake.get_one(&t, &name),
        (Method::POST, None) => match json_body() {
            Ok(b) => fake.create(&t, b, None),
            Err(e) => failure(400, "BadRequest", e),
        },
        (Method::PUT, Some(name)) => match json_body() {
            Ok(b) => fake.replace(&t, &name, b),
            Err(e) => failure(400, "BadRequest", e),
        },
        (Method::PATCH, Some(name)) => match json_body() {
            Ok(b) => fake.patch(&t, &name, &content_type, b),
            Err(e) => failure(400, "BadRequest", e),
        },
        (Method::DELETE, Some(name)) => fake.delete(&t, &name),
        (Method::DELETE, None) => fake.delete_collection(&t, parse_query(&uri)),
        (m, _) => failure(405, "MethodNotAllowed", format!("{m} {}", uri.path())),
    }
}
