//! REST paths of the operator API, built in one place so the provider and the
//! operator's router cannot disagree.
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/healthz` | liveness, no auth |
//! | GET | `/openapi.json` | the OpenAPI document, no auth |
//! | POST | `/v1/namespaces/{ns}/ensure` | create the namespace if missing (idempotent) |
//! | GET, POST | `/v1/namespaces/{ns}/functions` | list, create (201, 409 if the name exists) |
//! | GET, PATCH, DELETE | `/v1/namespaces/{ns}/functions/{name}` | read, partial update, delete |
//! | PUT | `/v1/namespaces/{ns}/functions/{name}/code?sha256=&source_hash=` | upload a zip; starts a build |
//! | GET | `/v1/namespaces/{ns}/functions/{name}/logs?kind=build\|run&tail=N` | logs as text |
//! | any | `/v1/namespaces/{ns}/functions/{name}/invoke[/rest]` | reverse proxy to the function |

/// The API version prefix.
pub const API_PREFIX: &str = "/v1";
/// Liveness probe path.
pub const HEALTHZ: &str = "/healthz";
/// OpenAPI document path.
pub const OPENAPI: &str = "/openapi.json";
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
