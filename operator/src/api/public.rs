//! Public, unauthenticated URLs: `ANY /t/{ns}/{name}[/{rest}]`, the public
//! face of an http trigger. [`forward_under`] is the generic part (path
//! suffix, query, headers, body through the invoke proxy) that any public
//! route can reuse.
//!
//! A trigger that is gone, disabled or not http answers 404 JSON (never 502);
//! a function that is gone answers 404, one that is not Ready 503.

use super::AppState;
use super::error::ApiFailure;
use super::proxy::{ProxyRequest, Record, forward};
use crate::backend::InvokeTarget;
use axum::extract::{ConnectInfo, RawPathParams, Request, State};
use axum::response::{IntoResponse, Response};
use sless_wire::InvocationSource;
use sless_wire::trigger::TriggerType;
use std::net::SocketAddr;

/// Proxies `req` to `target`, passing the part of the path after `prefix`
/// (`/` when none), the query, headers (minus hop-by-hop and `Authorization`)
/// and the streamed body (413 past `body_limit`); recorded in the invocation
/// log as `record` says.
pub async fn forward_under(
    state: &AppState,
    target: &InvokeTarget,
    prefix: &str,
    req: Request,
    body_limit: Option<usize>,
    record: Option<Record>,
) -> Response {
    let suffix = req.uri().path().strip_prefix(prefix).unwrap_or("");
    let path = if suffix.starts_with('/') {
        suffix.to_string()
    } else {
        format!("/{suffix}")
    };
    let client_addr = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let query = req.uri().query().map(str::to_string);
    let (parts, body) = req.into_parts();
    forward(
        &state.proxy,
        target,
        ProxyRequest {
            method: parts.method,
            path,
            query,
            headers: parts.headers,
            body,
            client_addr,
            body_limit,
            record,
        },
    )
    .await
}

/// `ns` and `name` of a public path; a value that cannot be a name means no
/// such object (404), not a bad request.
fn ns_and_name(params: &RawPathParams, kind: &str) -> Result<(String, String), ApiFailure> {
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    };
    let (ns, name) = (get("ns"), get("name"));
    if sless_wire::validate::name("name", &name).is_err()
        || sless_wire::validate::name("ns", &ns).is_err()
    {
        return Err(ApiFailure::not_found(format!(
            "no {kind} {name:?} in namespace {ns:?}"
        )));
    }
    Ok((ns, name))
}

/// The public URL of an http trigger: passes method, path after
/// `/t/{ns}/{name}`, query, headers and body to the trigger's function. No
/// token is needed; an `Authorization` header is not passed on.
#[utoipa::path(
    method(get, post, put, patch, delete, head, options),
    path = "/t/{ns}/{name}",
    tag = "public",
    params(
        ("ns" = String, Path, description = "The trigger's namespace"),
        ("name" = String, Path, description = "Trigger name"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "*/*", description = "Passed to the function as the event body"),
    responses(
        (status = 200, description = "The function's answer, whatever its status, headers and body"),
        (status = 404, description = "No such http trigger, the trigger is disabled, or its function is gone", body = sless_wire::ErrorBody),
        (status = 502, description = "The function's process failed (upstream_failed)", body = sless_wire::ErrorBody),
        (status = 503, description = "The function is not ready (building, restarting)", body = sless_wire::ErrorBody),
        (status = 504, description = "The function exceeded its timeout (upstream_timeout)", body = sless_wire::ErrorBody),
    )
)]
pub async fn trigger(state: State<AppState>, params: RawPathParams, req: Request) -> Response {
    serve_trigger(state, params, req, sless_wire::paths::trigger_public).await
}

/// The trigger behind `params`, served under the prefix `prefix(ns, name)`.
async fn serve_trigger(
    State(state): State<AppState>,
    params: RawPathParams,
    req: Request,
    prefix: fn(&str, &str) -> String,
) -> Response {
    let (ns, name) = match ns_and_name(&params, "trigger") {
        Ok(v) => v,
        Err(f) => return f.into_response(),
    };
    let spec = match state.backend.trigger_spec(&ns, &name).await {
        Ok(spec) => spec,
        Err(crate::Error::Unsupported(_)) => {
            return ApiFailure::not_found(format!("no trigger {name:?} in namespace {ns:?}"))
                .into_response();
        }
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    if spec.trigger_type != TriggerType::Http {
        return ApiFailure::not_found(format!(
            "trigger {name:?} is a {} trigger: it has no public URL",
            spec.trigger_type.as_str()
        ))
        .into_response();
    }
    if !spec.enabled {
        return ApiFailure::not_found(format!("trigger {name:?} is disabled (enabled = false)"))
            .into_response();
    }
    let target = match state.backend.invoke_target(&ns, &spec.function).await {
        Ok(target) => target,
        Err(e) => return ApiFailure::from(e).into_response(),
    };
    let prefix = prefix(&ns, &name);
    let limit = Some(sless_wire::limits::INVOKE_BODY_MAX_BYTES);
    let record = Record::installed(
        &ns,
        &spec.function,
        InvocationSource::HttpTrigger,
        Some(&name),
    );
    forward_under(&state, &target, &prefix, req, limit, record).await
}

/// The same URL with a path after the trigger's name (documented separately
/// so the OpenAPI document lists it).
#[utoipa::path(
    method(get, post, put, patch, delete, head, options),
    path = "/t/{ns}/{name}/{rest}",
    tag = "public",
    params(
        ("ns" = String, Path, description = "The trigger's namespace"),
        ("name" = String, Path, description = "Trigger name"),
        ("rest" = String, Path, description = "Path passed to the function as the event's `path`"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "*/*", description = "Passed to the function as the event body"),
    responses(
        (status = 200, description = "The function's answer, whatever its status, headers and body"),
        (status = 404, description = "No such http trigger, the trigger is disabled, or its function is gone", body = sless_wire::ErrorBody),
        (status = 502, description = "The function's process failed", body = sless_wire::ErrorBody),
        (status = 504, description = "The function exceeded its timeout", body = sless_wire::ErrorBody),
    )
)]
pub async fn trigger_rest(state: State<AppState>, params: RawPathParams, req: Request) -> Response {
    trigger(state, params, req).await
}

/// `/{ns}/{name}` of an http trigger, prefixed by `/<ns>/<trigger>`.
fn ingress_prefix(ns: &str, name: &str) -> String {
    format!("/{ns}/{name}")
}

/// `ANY /{ns}/{name}[/{rest}]`: the same as [`trigger`] under the path the
/// Kubernetes backend's Ingress uses (`<ingress host>/<ns>/<trigger>`), for
/// http triggers it routes through the operator (functions that scale to
/// zero). Not in the OpenAPI document: clients use `/t/...`.
pub async fn ingress_trigger(
    state: State<AppState>,
    params: RawPathParams,
    req: Request,
) -> Response {
    serve_trigger(state, params, req, ingress_prefix).await
}
