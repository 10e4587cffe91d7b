//! The HTTP client of the sless operator's REST API (see `sless_wire::paths`).
//! Error answers are decoded from `sless_wire::ErrorBody`, so a rejected field
//! keeps its name all the way to the Terraform diagnostic.

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use sless_wire::{
    ApiError, CreateFunction, CreateJob, CreateService, CreateTrigger, ErrorBody, ErrorCode,
    Function, Job, NamespaceInfo, Service, Trigger, UpdateFunction, UpdateJob, UpdateService,
    UpdateTrigger, paths,
};
use std::time::Duration;

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

    async fn json<T: serde::de::DeserializeOwned>(
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

    /// `POST path` with a JSON body, decoding the JSON answer.
    async fn post_json<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.json(Method::POST, path, self.req(Method::POST, path).json(body))
            .await
    }

    /// `PATCH path` with a JSON body, decoding the JSON answer.
    async fn patch_json<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.json(
            Method::PATCH,
            path,
            self.req(Method::PATCH, path).json(body),
        )
        .await
    }

    /// `GET path`; `None` on 404.
    async fn get_opt<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<T>, ClientError> {
        match self
            .json(Method::GET, path, self.req(Method::GET, path))
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_code(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `DELETE path`; false when it was already gone (404).
    async fn delete_path(&self, path: &str) -> Result<bool, ClientError> {
        match self
            .send(Method::DELETE, path, self.req(Method::DELETE, path))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_code(ErrorCode::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `PUT path?sha256=&source_hash=` with a zip as the body.
    async fn put_code<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        zip: Vec<u8>,
        sha256: &str,
        source_hash: &str,
    ) -> Result<T, ClientError> {
        let rb = self
            .req(Method::PUT, path)
            .query(&[("sha256", sha256), ("source_hash", source_hash)])
            .header(reqwest::header::CONTENT_TYPE, "application/zip")
            .body(zip);
        self.json(Method::PUT, path, rb).await
    }

    /// `GET path` with a query, as text.
    async fn get_text(&self, path: &str, query: &[(&str, &str)]) -> Result<String, ClientError> {
        let rb = self.req(Method::GET, path).query(query);
        let resp = self.send(Method::GET, path, rb).await?;
        resp.text().await.map_err(|e| ClientError::Decode {
            method: Method::GET,
            path: path.to_string(),
            reason: chain(&e),
        })
    }

    /// `POST /v1/namespaces/{ns}/functions`.
    pub async fn create_function(
        &self,
        ns: &str,
        body: &CreateFunction,
    ) -> Result<Function, ClientError> {
        self.post_json(&paths::functions(ns), body).await
    }

    /// `GET /v1/namespaces/{ns}/functions/{name}`; `None` on 404.
    pub async fn get_function(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<Function>, ClientError> {
        self.get_opt(&paths::function(ns, name)).await
    }

    /// `PATCH /v1/namespaces/{ns}/functions/{name}`.
    pub async fn update_function(
        &self,
        ns: &str,
        name: &str,
        body: &UpdateFunction,
    ) -> Result<Function, ClientError> {
        self.patch_json(&paths::function(ns, name), body).await
    }

    /// `DELETE /v1/namespaces/{ns}/functions/{name}`; false when it was
    /// already gone (404).
    pub async fn delete_function(&self, ns: &str, name: &str) -> Result<bool, ClientError> {
        self.delete_path(&paths::function(ns, name)).await
    }

    /// `PUT .../code?sha256=&source_hash=` with the zip as the body.
    pub async fn upload_code(
        &self,
        ns: &str,
        name: &str,
        zip: Vec<u8>,
        sha256: &str,
        source_hash: &str,
    ) -> Result<Function, ClientError> {
        self.put_code(&paths::function_code(ns, name), zip, sha256, source_hash)
            .await
    }

    /// The last `tail` lines of the build log.
    pub async fn build_log(
        &self,
        ns: &str,
        name: &str,
        tail: usize,
    ) -> Result<String, ClientError> {
        let tail = tail.to_string();
        self.get_text(
            &paths::function_logs(ns, name),
            &[("kind", "build"), ("tail", tail.as_str())],
        )
        .await
    }

    /// `POST /v1/namespaces/{ns}/triggers`.
    pub async fn create_trigger(
        &self,
        ns: &str,
        body: &CreateTrigger,
    ) -> Result<Trigger, ClientError> {
        self.post_json(&paths::triggers(ns), body).await
    }

    /// `GET /v1/namespaces/{ns}/triggers/{name}`; `None` on 404.
    pub async fn get_trigger(&self, ns: &str, name: &str) -> Result<Option<Trigger>, ClientError> {
        self.get_opt(&paths::trigger(ns, name)).await
    }

    /// `PATCH /v1/namespaces/{ns}/triggers/{name}`.
    pub async fn update_trigger(
        &self,
        ns: &str,
        name: &str,
        body: &UpdateTrigger,
    ) -> Result<Trigger, ClientError> {
        self.patch_json(&paths::trigger(ns, name), body).await
    }

    /// `DELETE /v1/namespaces/{ns}/triggers/{name}`; false when already gone.
    pub async fn delete_trigger(&self, ns: &str, name: &str) -> Result<bool, ClientError> {
        self.delete_path(&paths::trigger(ns, name)).await
    }

    /// `POST /v1/namespaces/{ns}/jobs`.
    pub async fn create_job(&self, ns: &str, body: &CreateJob) -> Result<Job, ClientError> {
        self.post_json(&paths::jobs(ns), body).await
    }

    /// `GET /v1/namespaces/{ns}/jobs/{name}`; `None` on 404.
    pub async fn get_job(&self, ns: &str, name: &str) -> Result<Option<Job>, ClientError> {
        self.get_opt(&paths::job(ns, name)).await
    }

    /// `PATCH /v1/namespaces/{ns}/jobs/{name}` (any change reruns the job).
    pub async fn update_job(
        &self,
        ns: &str,
        name: &str,
        body: &UpdateJob,
    ) -> Result<Job, ClientError> {
        self.patch_json(&paths::job(ns, name), body).await
    }

    /// `DELETE /v1/namespaces/{ns}/jobs/{name}`; false when already gone.
    pub async fn delete_job(&self, ns: &str, name: &str) -> Result<bool, ClientError> {
        self.delete_path(&paths::job(ns, name)).await
    }

    /// `PUT .../jobs/{name}/code?sha256=&source_hash=`: builds and runs.
    pub async fn upload_job_code(
        &self,
        ns: &str,
        name: &str,
        zip: Vec<u8>,
        sha256: &str,
        source_hash: &str,
    ) -> Result<Job, ClientError> {
        self.put_code(&paths::job_code(ns, name), zip, sha256, source_hash)
            .await
    }

    /// The last `tail` lines of a job's log: `kind` is `build` (unpack,
    /// dependency install) or `run` (the entrypoint's stdout and stderr).
    pub async fn job_log(
        &self,
        ns: &str,
        name: &str,
        kind: &str,
        tail: usize,
    ) -> Result<String, ClientError> {
        let tail = tail.to_string();
        self.get_text(
            &paths::job_logs(ns, name),
            &[("kind", kind), ("tail", tail.as_str())],
        )
        .await
    }

    /// `POST /v1/namespaces/{ns}/services`.
    pub async fn create_service(
        &self,
        ns: &str,
        body: &CreateService,
    ) -> Result<Service, ClientError> {
        self.post_json(&paths::services(ns), body).await
    }

    /// `GET /v1/namespaces/{ns}/services/{name}`; `None` on 404.
    pub async fn get_service(&self, ns: &str, name: &str) -> Result<Option<Service>, ClientError> {
        self.get_opt(&paths::service(ns, name)).await
    }

    /// `PATCH /v1/namespaces/{ns}/services/{name}`.
    pub async fn update_service(
        &self,
        ns: &str,
        name: &str,
        body: &UpdateService,
    ) -> Result<Service, ClientError> {
        self.patch_json(&paths::service(ns, name), body).await
    }

    /// `DELETE /v1/namespaces/{ns}/services/{name}`; false when already gone.
    pub async fn delete_service(&self, ns: &str, name: &str) -> Result<bool, ClientError> {
        self.delete_path(&paths::service(ns, name)).await
    }

    /// `PUT .../services/{name}/code?sha256=&source_hash=`: builds and starts.
    pub async fn upload_service_code(
        &self,
        ns: &str,
        name: &str,
        zip: Vec<u8>,
        sha256: &str,
        source_hash: &str,
    ) -> Result<Service, ClientError> {
        self.put_code(&paths::service_code(ns, name), zip, sha256, source_hash)
            .await
    }

    /// The last `tail` lines of a service's build log.
    pub async fn service_log(
        &self,
        ns: &str,
        name: &str,
        tail: usize,
    ) -> Result<String, ClientError> {
        let tail = tail.to_string();
        self.get_text(
            &paths::service_logs(ns, name),
            &[("kind", "build"), ("tail", tail.as_str())],
        )
        .await
    }

    /// The authenticated invoke URL of a function.
    pub fn invoke_url(&self, ns: &str, name: &str) -> String {
        format!("{}{}", self.endpoint, paths::function_invoke(ns, name))
    }
}
