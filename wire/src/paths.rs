//! REST paths of the operator API, built in one place so the provider and the
//! operator's router cannot disagree.
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/healthz` | liveness, no auth |
//! | GET | `/openapi.json` | the OpenAPI document, no auth |
//! | GET | `/metrics` | Prometheus metrics (text format 0.0.4), no auth |
//! | POST | `/v1/namespaces/{ns}/ensure` | create the namespace if missing (idempotent) |
//! | GET, POST | `/v1/namespaces/{ns}/functions` | list, create (201, 409 if the name exists) |
//! | GET, PATCH, DELETE | `/v1/namespaces/{ns}/functions/{name}` | read, partial update, delete |
//! | PUT | `/v1/namespaces/{ns}/functions/{name}/code?sha256=&source_hash=` | upload a zip; starts a build |
//! | GET | `/v1/namespaces/{ns}/functions/{name}/logs?kind=build\|run&tail=N` | logs as text |
//! | any | `/v1/namespaces/{ns}/functions/{name}/invoke[/rest]` | reverse proxy to the function |
//! | GET, POST | `/v1/namespaces/{ns}/triggers` | list, create |
//! | GET, PATCH, DELETE | `/v1/namespaces/{ns}/triggers/{name}` | read, partial update, delete |
//! | any | `/t/{ns}/{name}[/rest]` | public URL of an http trigger (no auth) |
//! | GET, POST | `/v1/namespaces/{ns}/jobs` | list, create |
//! | GET, PATCH, DELETE | `/v1/namespaces/{ns}/jobs/{name}` | read, partial update (reruns), delete |
//! | PUT | `/v1/namespaces/{ns}/jobs/{name}/code` | upload a zip; builds and runs |
//! | GET | `/v1/namespaces/{ns}/jobs/{name}/logs` | build and run output |
//! | GET, POST | `/v1/namespaces/{ns}/services` | list, create |
//! | GET, PATCH, DELETE | `/v1/namespaces/{ns}/services/{name}` | read, partial update, delete |
//! | PUT | `/v1/namespaces/{ns}/services/{name}/code` | upload a zip; builds and starts |
//! | GET | `/v1/namespaces/{ns}/services/{name}/logs` | build and run output |
//! | any | `/s/{ns}/{name}[/rest]` | public URL of a service (no auth) |
//! | GET | `/v1/namespaces/{ns}/invocations?function=&limit=` | the invocation log, newest first |
//! | GET | `/funcs/{ns}`, `/funcs?token=` | HTML page of a namespace's functions (token in the header or the query) |

/// The API version prefix.
pub const API_PREFIX: &str = "/v1";
/// Liveness probe path.
pub const HEALTHZ: &str = "/healthz";
/// OpenAPI document path.
pub const OPENAPI: &str = "/openapi.json";
/// Prometheus metrics path (text exposition format 0.0.4).
pub const METRICS: &str = "/metrics";
/// The HTML page of the token's own namespace (`?token=<jwt>` or a bearer header).
pub const FUNCS: &str = "/funcs";
/// Header that carries the provider's or client's name and version.
pub const USER_AGENT_PREFIX: &str = "terraform-provider-sless";

/// `/v1/namespaces/{ns}/ensure`
pub fn ensure_namespace(ns: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/ensure")
}

/// `/v1/namespaces/{ns}/functions`
pub fn functions(ns: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/functions")
}

/// `/v1/namespaces/{ns}/functions/{name}`
pub fn function(ns: &str, name: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/functions/{name}")
}

/// `/v1/namespaces/{ns}/functions/{name}/code`
pub fn function_code(ns: &str, name: &str) -> String {
    format!("{}/code", function(ns, name))
}

/// `/v1/namespaces/{ns}/functions/{name}/logs`
pub fn function_logs(ns: &str, name: &str) -> String {
    format!("{}/logs", function(ns, name))
}

/// `/v1/namespaces/{ns}/functions/{name}/invoke`
pub fn function_invoke(ns: &str, name: &str) -> String {
    format!("{}/invoke", function(ns, name))
}

/// `/v1/namespaces/{ns}/triggers`
pub fn triggers(ns: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/triggers")
}

/// `/v1/namespaces/{ns}/triggers/{name}`
pub fn trigger(ns: &str, name: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/triggers/{name}")
}

/// Public (unauthenticated) URL path of an http trigger: `/t/{ns}/{name}`;
/// anything after it is passed to the function as the path.
pub fn trigger_public(ns: &str, name: &str) -> String {
    format!("/t/{ns}/{name}")
}

/// `/v1/namespaces/{ns}/jobs`
pub fn jobs(ns: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/jobs")
}

/// `/v1/namespaces/{ns}/jobs/{name}`
pub fn job(ns: &str, name: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/jobs/{name}")
}

/// `/v1/namespaces/{ns}/jobs/{name}/code`
pub fn job_code(ns: &str, name: &str) -> String {
    format!("{}/code", job(ns, name))
}

/// `/v1/namespaces/{ns}/jobs/{name}/logs`
pub fn job_logs(ns: &str, name: &str) -> String {
    format!("{}/logs", job(ns, name))
}

/// `/v1/namespaces/{ns}/services`
pub fn services(ns: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/services")
}

/// `/v1/namespaces/{ns}/services/{name}`
pub fn service(ns: &str, name: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/services/{name}")
}

/// `/v1/namespaces/{ns}/services/{name}/code`
pub fn service_code(ns: &str, name: &str) -> String {
    format!("{}/code", service(ns, name))
}

/// `/v1/namespaces/{ns}/services/{name}/logs`
pub fn service_logs(ns: &str, name: &str) -> String {
    format!("{}/logs", service(ns, name))
}

/// Public (unauthenticated) URL path of a service: `/s/{ns}/{name}`.
pub fn service_public(ns: &str, name: &str) -> String {
    format!("/s/{ns}/{name}")
}

/// `/v1/namespaces/{ns}/invocations`: the invocation log.
pub fn invocations(ns: &str) -> String {
    format!("{API_PREFIX}/namespaces/{ns}/invocations")
}

/// `/funcs/{ns}`: the HTML page listing a namespace's functions.
pub fn funcs_page(ns: &str) -> String {
    format!("{FUNCS}/{ns}")
}
