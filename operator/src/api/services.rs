//! Services: create, get, list, partial update (in place, no rebuild unless
//! the runtime changes), delete, code upload and logs. Every returned service
//! carries its absolute public URL (`<public-url>/s/<ns>/<name>`).

use super::AppState;
use super::error::ApiResult;
use super::extract::{Caller, FnName, JsonBody, parse_query};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header::CONTENT_TYPE, header::LOCATION};
use axum::response::IntoResponse;
use sless_wire::function::LogQuery;
use sless_wire::{CreateService, ErrorBody, Service, ServiceList, UpdateService};

/// Fills in the absolute public URL.
fn with_url(state: &AppState, mut svc: Service) -> Service {
    svc.status.url = Some(format!(
        "{}{}",
        state.public_url,
        sless_wire::paths::service_public(&svc.namespace, &svc.name)
    ));
    svc
}

/// Creates a service (phase Pending until code is uploaded). The namespace is
/// ensured first.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/services",
    tag = "services",
    params(("ns" = String, Path, description = "The caller's namespace")),
    request_body(content = CreateService, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = Service),
        (status = 400, description = "A field breaks a rule; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 409, description = "A service with this name exists", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateService>,
) -> ApiResult<(StatusCode, HeaderMap, Json<Service>)> {
    let (name, spec) = body.validate()?;
    state.backend.ensure_namespace(&caller.namespace).await?;
    let svc = state
        .backend
        .create_service(&caller.namespace, &name, spec)
        .await?;
    tracing::info!(namespace = %caller.namespace, service = %name, "service created");
    let mut headers = HeaderMap::new();
    let location = format!(
        "{}{}",
        state.public_url,
        sless_wire::paths::service(&caller.namespace, &name)
    );
    if let Ok(v) = HeaderValue::from_str(&location) {
        headers.insert(LOCATION, v);
    }
    Ok((StatusCode::CREATED, headers, Json(with_url(&state, svc))))
}

/// Reads one service.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/services/{name}",
    tag = "services",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Service name"),
    ),
    responses(
        (status = 200, description = "The service", body = Service),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such service", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
) -> ApiResult<Json<Service>> {
    let svc = state.backend.get_service(&caller.namespace, &name).await?;
    Ok(Json(with_url(&state, svc)))
}

/// Lists the namespace's services, sorted by name.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/services",
    tag = "services",
    params(("ns" = String, Path, description = "The caller's namespace")),
    responses(
        (status = 200, description = "The services", body = ServiceList),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<ServiceList>> {
    let items = match state.backend.list_services(&caller.namespace).await {
        Ok(items) => items,
        Err(crate::Error::NotFound {
            kind: "namespace", ..
        }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let items = items.into_iter().map(|s| with_url(&state, s)).collect();
    Ok(Json(ServiceList { items }))
}

/// Applies a partial update in place: env, memory, entrypoint, command and
/// health path start a new process from the same build (ready before the old
/// one stops); a runtime change rebuilds.
#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/services/{name}",
    tag = "services",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Service name"),
    ),
    request_body(content = UpdateService, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated service", body = Service),
        (status = 400, description = "A field breaks a rule; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such service", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    JsonBody(body): JsonBody<UpdateService>,
) -> ApiResult<Json<Service>> {
    let current = state.backend.get_service(&caller.namespace, &name).await?;
    body.apply_to(&current.spec)?;
    let svc = state
        .backend
        .update_service(&caller.namespace, &name, body)
        .await?;
    tracing::info!(namespace = %caller.namespace, service = %name, "service updated");
    Ok(Json(with_url(&state, svc)))
}

/// Deletes a service: its build and process stop, its URL answers 404.
#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/services/{name}",
    tag = "services",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Service name"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such service", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
) -> ApiResult<StatusCode> {
    state
        .backend
        .delete_service(&caller.namespace, &name)
        .await?;
    tracing::info!(namespace = %caller.namespace, service = %name, "service deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// Stores the service's code zip and (once per code version) builds and
/// starts it.
#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/services/{name}/code",
    tag = "services",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Service name"),
        ("sha256" = String, Query, description = "sha256 (hex) of the zip body; the operator verifies it (400 if it differs)"),
        ("source_hash" = Option<String>, Query, description = "Optional client-side hash of the source content, stored as given"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "application/zip", description = "The code zip (at most 64 MiB)"),
    responses(
        (status = 202, description = "Code stored; the build and start go on in the background", body = Service),
        (status = 400, description = "Bad sha256 or unsafe/unreadable zip; `error.field` names the field", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such service", body = ErrorBody),
        (status = 413, description = "The zip is over the size limit", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Service>)> {
    let code = super::code::receive(&uri, &headers, body).await?;
    tracing::info!(namespace = %caller.namespace, service = %name, sha256 = %code.sha256, "service code uploaded");
    let svc = state
        .backend
        .upload_service_code(&caller.namespace, &name, code)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(with_url(&state, svc))))
}

/// The service's build log (default) or its process output, as text.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/services/{name}/logs",
    tag = "services",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Service name"),
        ("kind" = Option<sless_wire::function::LogKind>, Query, description = "`build` (default): builds and starts; `run`: the process's stdout and stderr"),
        ("tail" = Option<usize>, Query, description = "Only the last N lines"),
    ),
    responses(
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such service", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn logs(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    uri: Uri,
) -> ApiResult<impl IntoResponse> {
    let q: LogQuery = parse_query(uri.query())?;
    let text = state
        .backend
        .read_service_logs(&caller.namespace, &name, q.kind, q.tail)
        .await?;
    Ok(([(CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}
