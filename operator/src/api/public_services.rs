//! `ANY /s/{ns}/{name}[/{rest}]`: the public, unauthenticated URL of a
//! service, a reverse proxy to its process (through
//! [`super::public::forward_under`]) with the service's `timeout_sec`.
//! A service that does not exist answers 404, one that is not ready 503.

use super::AppState;
use super::error::ApiFailure;
use axum::extract::{RawPathParams, Request, State};
use axum::response::{IntoResponse, Response};

/// The service's public URL: method, path after `/s/{ns}/{name}`, query,
/// headers (minus hop-by-hop and `Authorization`) and body go to the service.
#[utoipa::path(
    method(get, post, put, patch, delete, head, options),
    path = "/s/{ns}/{name}",
    tag = "public",
    params(
        ("ns" = String, Path, description = "The service's namespace"),
        ("name" = String, Path, description = "Service name"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "*/*", description = "Passed to the service as is"),
    responses(
        (status = 200, description = "The service's answer, whatever its status, headers and body"),
        (status = 404, description = "No such service", body = sless_wire::ErrorBody),
        (status = 502, description = "The service's process failed (upstream_failed)", body = sless_wire::ErrorBody),
        (status = 503, description = "The service is not ready (building, restarting)", body = sless_wire::ErrorBody),
        (status = 504, description = "The service exceeded its timeout_sec (upstream_timeout)", body = sless_wire::ErrorBody),
    )
)]
pub async fn service(
    State(state): State<AppState>,
    params: RawPathParams,
    req: Request,
) -> Response {
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    };
    let (ns, name) = (param("ns"), param("name"));
    let valid = |v: &str| sless_wire::validate::name("name", v).is_ok();
    if !valid(&ns) || !valid(&name) {
        return ApiFailure::not_found(format!("no service {name:?} in namespace {ns:?}"))
            .into_response();
    }
    let target = match state.backend.service_target(&ns, &name).await {
        Ok(t) => t,
        Err(crate::Error::Unsupported(_)) => {
            return ApiFailure::not_found(format!("no service {name:?} in namespace {ns:?}"))
                .into_response();
        }
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    let prefix = sless_wire::paths::service_public(&ns, &name);
    // A service is the user's own HTTP server: bodies stream through unbounded.
    // A service is not a function call: not in the invocation log.
    super::public::forward_under(&state, &target, &prefix, req, None, None).await
}

/// The same URL with a path after the service's name (documented separately
/// so the OpenAPI document lists it).
#[utoipa::path(
    method(get, post, put, patch, delete, head, options),
    path = "/s/{ns}/{name}/{rest}",
    tag = "public",
    params(
        ("ns" = String, Path, description = "The service's namespace"),
        ("name" = String, Path, description = "Service name"),
        ("rest" = String, Path, description = "Path passed to the service"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "*/*", description = "Passed to the service as is"),
    responses(
        (status = 200, description = "The service's answer, whatever its status, headers and body"),
        (status = 404, description = "No such service", body = sless_wire::ErrorBody),
        (status = 502, description = "The service's process failed", body = sless_wire::ErrorBody),
        (status = 503, description = "The service is not ready", body = sless_wire::ErrorBody),
        (status = 504, description = "The service exceeded its timeout_sec", body = sless_wire::ErrorBody),
    )
)]
pub async fn service_rest(state: State<AppState>, params: RawPathParams, req: Request) -> Response {
    service(state, params, req).await
}
