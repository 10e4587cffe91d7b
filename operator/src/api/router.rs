//! The route table, the fallbacks (404/405 as JSON) and request logging.

use super::error::ApiFailure;
use super::{AppState, code, functions, invoke, logs, namespaces, openapi, public, triggers};
use super::{funcs, invocations, jobs, metrics, public_services, services};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get, post, put};
use sless_wire::ErrorCode;
use std::time::Instant;

/// Builds the HTTP application: `/healthz`, `/openapi.json`, `/metrics`,
/// `/funcs[/{ns}]` (HTML), `/v1/...`, the public `/t/...`, `/s/...` URLs and
/// `/{ns}/{trigger}[/...]` (an http trigger as the kube backend's Ingress
/// forwards it).
pub fn router(state: AppState) -> Router {
    const FUNCTION: &str = "/v1/namespaces/{ns}/functions/{name}";
    let v1 = Router::new()
        .route("/v1/namespaces/{ns}/ensure", post(namespaces::ensure))
        .route(
            "/v1/namespaces/{ns}/functions",
            get(functions::list).post(functions::create),
        )
        .route(
            FUNCTION,
            get(functions::get)
                .patch(functions::update)
                .delete(functions::delete),
        )
        .route(&format!("{FUNCTION}/code"), put(code::upload))
        .route(&format!("{FUNCTION}/logs"), get(logs::read))
        .route(&format!("{FUNCTION}/invoke"), any(invoke::invoke))
        .route(&format!("{FUNCTION}/invoke/"), any(invoke::invoke))
        .route(
            &format!("{FUNCTION}/invoke/{{*rest}}"),
            any(invoke::invoke_rest),
        )
        .route(
            "/v1/namespaces/{ns}/triggers",
            get(triggers::list).post(triggers::create),
        )
        .route(
            "/v1/namespaces/{ns}/triggers/{name}",
            get(triggers::get)
                .patch(triggers::update)
                .delete(triggers::delete),
        )
        .route(
            "/v1/namespaces/{ns}/triggers/{name}/logs",
            get(triggers::logs),
        )
        .route(
            "/v1/namespaces/{ns}/jobs",
            get(jobs::list).post(jobs::create),
        )
        .route(
            "/v1/namespaces/{ns}/jobs/{name}",
            get(jobs::get).patch(jobs::update).delete(jobs::delete),
        )
        .route("/v1/namespaces/{ns}/jobs/{name}/code", put(jobs::upload))
        .route("/v1/namespaces/{ns}/jobs/{name}/logs", get(jobs::logs))
        .route(
            "/v1/namespaces/{ns}/services",
            get(services::list).post(services::create),
        )
        .route(
            "/v1/namespaces/{ns}/services/{name}",
            get(services::get)
                .patch(services::update)
                .delete(services::delete),
        )
        .route(
            "/v1/namespaces/{ns}/services/{name}/code",
            put(services::upload),
        )
        .route(
            "/v1/namespaces/{ns}/services/{name}/logs",
            get(services::logs),
        )
        .route("/v1/namespaces/{ns}/invocations", get(invocations::list));
    let public_routes = Router::new()
        .route("/t/{ns}/{name}", any(public::trigger))
        .route("/t/{ns}/{name}/", any(public::trigger))
        .route("/t/{ns}/{name}/{*rest}", any(public::trigger_rest))
        .route("/s/{ns}/{name}", any(public_services::service))
        .route("/s/{ns}/{name}/", any(public_services::service))
        .route("/s/{ns}/{name}/{*rest}", any(public_services::service_rest))
        // The Kubernetes backend's Ingress form of `/t/...` (functions
        // that scale to zero); static routes above take precedence.
        .route("/{ns}/{name}", any(public::ingress_trigger))
        .route("/{ns}/{name}/", any(public::ingress_trigger))
        .route("/{ns}/{name}/{*rest}", any(public::ingress_trigger));
    Router::new()
        .route(sless_wire::paths::HEALTHZ, get(healthz))
        .route(sless_wire::paths::OPENAPI, get(openapi::serve))
        .route(sless_wire::paths::METRICS, get(metrics::serve))
        .route(sless_wire::paths::FUNCS, get(funcs::own))
        .route("/funcs/{ns}", get(funcs::namespace))
        .merge(v1)
        .merge(public_routes)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Extractors enforce their own limits (JSON and code bodies).
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn(log_requests))
        .with_state(state)
}

/// Liveness: 200 `ok` while the server runs.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "meta",
    responses((status = 200, description = "The operator is up", body = String, content_type = "text/plain"))
)]
pub async fn healthz(State(state): State<AppState>) -> String {
    let mut body = String::from("ok\n");
    for w in state.backend.health_warnings() {
        body.push_str("WARNING: ");
        body.push_str(&w);
        body.push('\n');
    }
    body
}

async fn not_found(uri: Uri) -> ApiFailure {
    ApiFailure::not_found(format!(
        "no such endpoint: {}; see /openapi.json",
        uri.path().chars().take(200).collect::<String>()
    ))
}

async fn method_not_allowed() -> ApiFailure {
    ApiFailure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::BadRequest,
        "this endpoint does not support the method; see /openapi.json",
    )
}

/// True for the paths whose calls go to a function or service (invoke
/// endpoints, `/t/…`, `/s/…`, `/<ns>/<trigger>`): the hot path, recorded in the invocation log,
/// logged per request only at DEBUG.
fn is_proxied(path: &str) -> bool {
    if path.starts_with(sless_wire::paths::API_PREFIX) {
        return path.contains("/invoke");
    }
    // `/t/…`, `/s/…`, and the kube Ingress form `/<ns>/<trigger>[/…]`.
    !path.starts_with(sless_wire::paths::FUNCS) && path.trim_start_matches('/').contains('/')
}

/// Logs every request: method, path (never headers or query: `/funcs?token=`
/// carries a token there), status, time (at INFO, except probes and
/// proxied calls, at DEBUG); and counts it by status class for `/metrics`.
async fn log_requests(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    metrics::HTTP.record(status);
    if path == sless_wire::paths::HEALTHZ || path == sless_wire::paths::METRICS || is_proxied(&path)
    {
        tracing::debug!(%method, %path, status, elapsed_ms, "request");
    } else {
        tracing::info!(%method, %path, status, elapsed_ms, "request");
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::is_proxied;

    #[test]
    fn calls_to_functions_are_told_from_api_requests() {
        for p in [
            "/t/ns/trig",
            "/t/ns/trig/a/b",
            "/s/ns/svc",
            "/ns/trig",
            "/ns/trig/x",
            "/v1/namespaces/ns/functions/f/invoke",
            "/v1/namespaces/ns/functions/f/invoke/x",
        ] {
            assert!(is_proxied(p), "{p}");
        }
        for p in [
            "/v1/namespaces/ns/functions",
            "/v1/namespaces/ns/functions/f",
            "/funcs",
            "/funcs/ns",
            "/healthz",
            "/",
        ] {
            assert!(!is_proxied(p), "{p}");
        }
    }
}
