//! `ANY /v1/namespaces/{ns}/functions/{name}/invoke[/{rest}]`: the
//! authenticated invoke endpoint, a reverse proxy to the function.

use super::AppState;
use super::error::ApiFailure;
use super::extract::{Caller, FnName};
use super::proxy::Record;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use sless_wire::InvocationSource;

/// Proxies the request to the function: method, path after `/invoke`, query,
/// headers (minus hop-by-hop and `Authorization`) and body, all streamed.
/// The call is recorded in the invocation log (source `invoke`).
#[utoipa::path(
    method(get, post, put, patch, delete, head, options),
    path = "/v1/namespaces/{ns}/functions/{name}/invoke",
    tag = "invoke",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "*/*", description = "Passed to the function as the event body"),
    responses(
        (status = 200, description = "The function's answer, whatever its status, headers and body"),
        (status = 401, description = "Missing or invalid token", body = sless_wire::ErrorBody),
        (status = 403, description = "The token is for another namespace", body = sless_wire::ErrorBody),
        (status = 404, description = "No such function", body = sless_wire::ErrorBody),
        (status = 413, description = "The body is over the invoke limit (16 MiB)", body = sless_wire::ErrorBody),
        (status = 502, description = "The function's process failed (upstream_failed)", body = sless_wire::ErrorBody),
        (status = 503, description = "The function is not ready (building, restarting)", body = sless_wire::ErrorBody),
        (status = 504, description = "The function exceeded its timeout (upstream_timeout)", body = sless_wire::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn invoke(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    req: Request,
) -> Response {
    let target = match state.backend.invoke_target(&caller.namespace, &name).await {
        Ok(t) => t,
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    let prefix = sless_wire::paths::function_invoke(&caller.namespace, &name);
    let limit = Some(sless_wire::limits::INVOKE_BODY_MAX_BYTES);
    let record = Record::installed(&caller.namespace, &name, InvocationSource::Invoke, None);
    super::public::forward_under(&state, &target, &prefix, req, limit, record).await
}

/// The same endpoint with a path after `/invoke` (documented separately so the
/// OpenAPI document lists it).
#[utoipa::path(
    method(get, post, put, patch, delete, head, options),
    path = "/v1/namespaces/{ns}/functions/{name}/invoke/{rest}",
    tag = "invoke",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
        ("rest" = String, Path, description = "Path passed to the function as the event's `path`"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "*/*", description = "Passed to the function as the event body"),
    responses(
        (status = 200, description = "The function's answer, whatever its status, headers and body"),
        (status = 404, description = "No such function", body = sless_wire::ErrorBody),
        (status = 502, description = "The function's process failed", body = sless_wire::ErrorBody),
        (status = 504, description = "The function exceeded its timeout", body = sless_wire::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn invoke_rest(
    state: State<AppState>,
    caller: Caller,
    name: FnName,
    req: Request,
) -> Response {
    invoke(state, caller, name, req).await
}
