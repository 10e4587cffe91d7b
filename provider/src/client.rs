//! The HTTP client of the sless operator's REST API (see `sless_wire::paths`).
//! Error answers are decoded from `sless_wire::ErrorBody`, so a rejected field
//! keeps its name all the way to the Terraform diagnostic.

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sless_wire::{
    ApiError, CreateFunction, CreateJob, CreateService, CreateTrigger, ErrorBody, ErrorCode,
    Function, Job, NamespaceInfo, Service, Trigger, UpdateFunction, UpdateJob, UpdateService,
    UpdateTrigger, paths,
};
use std::time::Duration;

/// A kind of object the operator keeps per namespace (function, trigger, job,
/// service): its API paths, its request bodies and its name in messages.
pub trait Kind: DeserializeOwned + Send {
    /// The body of a create.
    type Create: Serialize + Sync;
    /// The body of a partial update.
    type Update: Serialize + Sync;
    /// The kind in messages: `function`, `trigger`, `job`, `service`.
    const NOUN: &'static str;
    /// The collection in namespace `ns`: `/v1/namespaces/{ns}/<kind>s`.
    fn collection(ns: &str) -> String;
    /// The object `name` in `ns`: `/v1/namespaces/{ns}/<kind>s/{name}`.
    fn path(ns: &str, name: &str) -> String;
    /// The patch that adopts `self`, found under the name a create of `body`
    /// wanted, when it is what an interrupted create left: an object that
    /// never got any code (the operator stored the create and died before it
    /// answered, so Terraform never recorded it). The patch sets every field
    /// of `body`, defaults resolved, because the configuration may have
    /// changed since that create. `None`, the default, keeps "already
    /// exists": always for triggers, which carry no such mark, and for
    /// anything that has code.
    fn adoption_patch(&self, _body: &Self::Create) -> Option<Self::Update> {
        None
    }
}

/// A kind built from uploaded code (function, job, service).
pub trait Built: Kind {
    /// Where its code is uploaded: `.../{name}/code`.
    fn code_path(ns: &str, name: &str) -> String;
    /// Where its logs are read: `.../{name}/logs`.
    fn logs_path(ns: &str, name: &str) -> String;
}

impl Kind for Function {
    type Create = CreateFunction;
    type Update = UpdateFunction;
    const NOUN: &'static str = "function";
    fn collection(ns: &str) -> String {
        paths::functions(ns)
    }
    fn path(ns: &str, name: &str) -> String {
        paths::function(ns, name)
    }
    fn adoption_patch(&self, body: &CreateFunction) -> Option<UpdateFunction> {
        // Every field, defaults resolved: a bad body has none (the create
        // that found the name taken would have been refused first).
        let never_got_code = self.status.code_sha256.is_none();
        never_got_code.then(|| body.to_full_update().ok()).flatten()
    }
}

impl Built for Function {
    fn code_path(ns: &str, name: &str) -> String {
        paths::function_code(ns, name)
    }
    fn logs_path(ns: &str, name: &str) -> String {
        paths::function_logs(ns, name)
    }
}

impl Kind for Trigger {
    type Create = CreateTrigger;
    type Update = UpdateTrigger;
    const NOUN: &'static str = "trigger";
    fn collection(ns: &str) -> String {
        paths::triggers(ns)
    }
    fn path(ns: &str, name: &str) -> String {
        paths::trigger(ns, name)
    }
}

impl Kind for Job {
    type Create = CreateJob;
    type Update = UpdateJob;
    const NOUN: &'static str = "job";
    fn collection(ns: &str) -> String {
        paths::jobs(ns)
    }
    fn path(ns: &str, name: &str) -> String {
        paths::job(ns, name)
    }
    fn adoption_patch(&self, body: &CreateJob) -> Option<UpdateJob> {
        // Every field, defaults resolved: a bad body has none (the create
        // that found the name taken would have been refused first).
        let never_got_code = self.status.code_sha256.is_none();
        never_got_code.then(|| body.to_full_update().ok()).flatten()
    }
}

impl Built for Job {
    fn code_path(ns: &str, name: &str) -> String {
        paths::job_code(ns, name)
    }
    fn logs_path(ns: &str, name: &str) -> String {
        paths::job_logs(ns, name)
    }
}

impl Kind for Service {
    type Create = CreateService;
    type Update = UpdateService;
    const NOUN: &'static str = "service";
    fn collection(ns: &str) -> String {
        paths::services(ns)
    }
    fn path(ns: &str, name: &str) -> String {
        paths::service(ns, name)
    }
    fn adoption_patch(&self, body: &CreateService) -> Option<UpdateService> {
        // Every field, defaults resolved: a bad body has none (the create
        // that found the name taken would have been refused first).
        let never_got_code = self.status.code_sha256.is_none();
        never_got_code.then(|| body.to_full_update().ok()).flatten()
    }
}

impl Built for Service {
    fn code_path(ns: &str, name: &str) -> String {
        paths::service_code(ns, name)
    }
    fn logs_path(ns: &str, name: &str) -> String {
        paths::service_logs(ns, name)
    }
}

/// What went wrong talking to the operator.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The endpoint could not be reached (DNS, refused, TLS, timeout).
    #[error(
        "cannot reach the sless operator at {endpoint}: {source}. Check `endpoint` (or SLESS_ENDPOINT) and that the operator is running"
    )]
    Unreachable {
        /// The operator endpoint.
        endpoint: String,
        /// The transport error, with its causes.
        #[source]
        source: reqwest::Error,
    },
    /// 401: the operator did not accept the token.
    #[error("the operator rejected the token: {0}")]
    Unauthorized(ApiError),
    /// Any other error answer of the API.
    #[error("{method} {path} failed with HTTP {status}: {error}")]
    Api {
        /// HTTP method.
        method: Method,
        /// Request path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The decoded error body (or one made from the raw body).
        error: ApiError,
    },
    /// A success answer whose body could not be decoded.
    #[error("{method} {path}: unexpected answer body: {reason}")]
    Decode {
        /// HTTP method.
        method: Method,
        /// Request path.
        path: String,
        /// What did not parse.
        reason: String,
    },
}

impl ClientError {
    /// The API error carried by this error, if any.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            ClientError::Unauthorized(e) | ClientError::Api { error: e, .. } => Some(e),
            _ => None,
        }
    }

    /// True when the request may have been acted on although no usable
    /// answer came: the connection broke after it was made (reset, closed,
    /// timed out) or a success answer's body was cut or unreadable. False
    /// when no connection was made and for error answers.
    pub fn may_have_reached_the_operator(&self) -> bool {
        match self {
            ClientError::Unreachable { source, .. } => !source.is_connect() && !source.is_builder(),
            ClientError::Decode { .. } => true,
            ClientError::Unauthorized(_) | ClientError::Api { .. } => false,
        }
    }

    /// True when the API answered with this error code.
    pub fn is_code(&self, code: ErrorCode) -> bool {
        self.api_error().is_some_and(|e| e.code == code)
    }
}

/// A client for one operator endpoint and one token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    endpoint: String,
    token: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

fn build_http(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .user_agent(crate::user_agent())
        .connect_timeout(timeout.min(Duration::from_secs(30)))
        .timeout(timeout)
        .build()
}

/// Checks a token against the cloud's API (`nubes_endpoint`) with an
/// authenticated GET. Returns a message for the user when it is rejected.
pub async fn check_token_with_cloud(
    url: &str,
    token: &str,
    timeout: Duration,
) -> Result<(), String> {
    let http = build_http(timeout).map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let resp = http
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| format!("cannot reach the cloud API at {url} to check the token: {}. Check `nubes_endpoint` (or NUBES_ENDPOINT)", chain(&e)))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body = resp.text().await.unwrap_or_default();
    let body = body.chars().take(300).collect::<String>();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        Err(format!(
            "the cloud API at {url} rejected the token (HTTP {}): {body}. The token is expired, revoked or not a Nubes token: get a fresh one and set `token` or SLESS_TOKEN",
            status.as_u16()
        ))
    } else {
        Err(format!(
            "the cloud API at {url} answered HTTP {} while checking the token: {body}",
            status.as_u16()
        ))
    }
}

/// Joins an error and its causes into one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let cs = c.to_string();
        if !s.contains(&cs) {
            s.push_str(": ");
            s.push_str(&cs);
        }
        cur = c.source();
    }
    s
}

impl Client {
    /// A client for `endpoint` (e.g. `http://127.0.0.1:8080`) with a bearer token
    /// and a per-request timeout.
    pub fn new(endpoint: &str, token: &str, timeout: Duration) -> Result<Client, String> {
        let http = build_http(timeout).map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(Client {
            http,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    /// The operator endpoint without a trailing slash.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.endpoint))
            .bearer_auth(&self.token)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        rb: RequestBuilder,
    ) -> Result<Response, ClientError> {
        let resp = rb.send().await.map_err(|source| ClientError::Unreachable {
            endpoint: self.endpoint.clone(),
            source,
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.unwrap_or_default();
        let error = match serde_json::from_str::<ErrorBody>(&text) {
            Ok(b) => b.error,
            Err(_) => ApiError {
                code: match status {
                    StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
                    StatusCode::FORBIDDEN => ErrorCode::Forbidden,
                    StatusCode::NOT_FOUND => ErrorCode::NotFound,
                    StatusCode::CONFLICT => ErrorCode::Conflict,
                    _ => ErrorCode::Internal,
                },
                message: if text.trim().is_empty() {
                    status.to_string()
                } else {
                    text.chars().take(500).collect()
                },
                field: None,
            },
        };
        if status == StatusCode::UNAUTHORIZED {
            return Err(ClientError::Unauthorized(error));
        }
        Err(ClientError::Api {
            method,
            path: path.to_string(),
            status: status.as_u16(),
            error,
        })
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        rb: RequestBuilder,
    ) -> Result<T, ClientError> {
        let resp = self.send(method.clone(), path, rb).await?;
        let bytes = resp.bytes().await.map_err(|e| ClientError::Decode {
            method: method.clone(),
            path: path.to_string(),
            reason: chain(&e),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
            method,
            path: path.to_string(),
            reason: e.to_string(),
        })
    }

    /// `POST /v1/namespaces/{ns}/ensure`.
    pub async fn ensure_namespace(&self, ns: &str) -> Result<NamespaceInfo, ClientError> {
        let path = paths::ensure_namespace(ns);
        self.json(Method::POST, &path, self.req(Method::POST, &path))
            .await
    }

    /// `POST` of a new `K` to its collection in `ns`.
    pub async fn create<K: Kind>(&self, ns: &str, body: &K::Create) -> Result<K, ClientError> {
        let path = K::collection(ns);
        let rb = self.req(Method::POST, &path).json(body);
        self.json(Method::POST, &path, rb).await
    }

    /// `GET` of the `K` named `name`; `None` on 404.
    pub async fn get<K: Kind>(&self, ns: &str, name: &str) -> Result<Option<K>, ClientError> {
        let path = K::path(ns, name);
        match self
            .json(Method::GET, &path, self.req(Method::GET, &path))
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_code(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `PATCH` of the `K` named `name` (any change of a job reruns it).
    pub async fn update<K: Kind>(
        &self,
        ns: &str,
        name: &str,
        body: &K::Update,
    ) -> Result<K, ClientError> {
        let path = K::path(ns, name);
        let rb = self.req(Method::PATCH, &path).json(body);
        self.json(Method::PATCH, &path, rb).await
    }

    /// `DELETE` of the `K` named `name`; false when it was already gone (404).
    pub async fn delete<K: Kind>(&self, ns: &str, name: &str) -> Result<bool, ClientError> {
        let path = K::path(ns, name);
        match self
            .send(Method::DELETE, &path, self.req(Method::DELETE, &path))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_code(ErrorCode::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `PUT .../code?sha256=&source_hash=` with the zip as the body: builds
    /// the code (and runs a job, starts a service).
    pub async fn upload_code<K: Built>(
        &self,
        ns: &str,
        name: &str,
        zip: Vec<u8>,
        sha256: &str,
        source_hash: &str,
    ) -> Result<K, ClientError> {
        let path = K::code_path(ns, name);
        let rb = self
            .req(Method::PUT, &path)
            .query(&[("sha256", sha256), ("source_hash", source_hash)])
            .header(reqwest::header::CONTENT_TYPE, "application/zip")
            .body(zip);
        self.json(Method::PUT, &path, rb).await
    }

    /// The last `tail` lines of a log of the `K` named `name`: `log` is
    /// `build` (unpack, dependency install) or, for a job, `run` (the
    /// entrypoint's stdout and stderr).
    pub async fn log<K: Built>(
        &self,
        ns: &str,
        name: &str,
        log: &str,
        tail: usize,
    ) -> Result<String, ClientError> {
        let path = K::logs_path(ns, name);
        let tail = tail.to_string();
        let rb = self
            .req(Method::GET, &path)
            .query(&[("kind", log), ("tail", tail.as_str())]);
        let resp = self.send(Method::GET, &path, rb).await?;
        resp.text().await.map_err(|e| ClientError::Decode {
            method: Method::GET,
            path,
            reason: chain(&e),
        })
    }

    /// The authenticated invoke URL of a function.
    pub fn invoke_url(&self, ns: &str, name: &str) -> String {
        format!("{}{}", self.endpoint, paths::function_invoke(ns, name))
    }
}
