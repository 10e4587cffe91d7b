//! Function CRUD: create, get, list, partial update, delete.

use super::AppState;
use super::error::ApiResult;
use super::extract::{Caller, FnName, JsonBody};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header::LOCATION};
use sless_wire::{CreateFunction, ErrorBody, Function, FunctionList, UpdateFunction};

/// Creates a function (phase Pending until code is uploaded). The namespace is
/// ensured first, so a fresh user needs no separate call.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/functions",
    tag = "functions",
    params(("ns" = String, Path, description = "The caller's namespace")),
    request_body(content = CreateFunction, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = Function),
        (status = 400, description = "A field breaks a rule; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 409, description = "A function with this name exists", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateFunction>,
) -> ApiResult<(StatusCode, HeaderMap, Json<Function>)> {
    let (name, spec) = body.validate()?;
    state.backend.ensure_namespace(&caller.namespace).await?;
    let f = state
        .backend
        .create_function(&caller.namespace, &name, spec)
        .await?;
    tracing::info!(namespace = %caller.namespace, function = %name, "function created");
    let mut headers = HeaderMap::new();
    let location = format!(
        "{}{}",
        state.public_url,
        sless_wire::paths::function(&caller.namespace, &name)
    );
    if let Ok(v) = HeaderValue::from_str(&location) {
        headers.insert(LOCATION, v);
    }
    Ok((StatusCode::CREATED, headers, Json(f)))
}

/// Reads one function.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}",
    tag = "functions",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
    ),
    responses(
        (status = 200, description = "The function", body = Function),
        (status = 400, description = "Bad name", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such function", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
) -> ApiResult<Json<Function>> {
    Ok(Json(
        state.backend.get_function(&caller.namespace, &name).await?,
    ))
}

/// Lists the namespace's functions, sorted by name.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions",
    tag = "functions",
    params(("ns" = String, Path, description = "The caller's namespace")),
    responses(
        (status = 200, description = "The functions", body = FunctionList),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<FunctionList>> {
    let items = match state.backend.list_functions(&caller.namespace).await {
        Ok(items) => items,
        // A namespace nobody ensured yet simply has no functions.
        Err(crate::Error::NotFound {
            kind: "namespace", ..
        }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(FunctionList { items }))
}

/// Applies a partial update: absent fields keep their values; `env_vars`,
/// when given, replaces the whole map.
#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/functions/{name}",
    tag = "functions",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
    ),
    request_body(content = UpdateFunction, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated function", body = Function),
        (status = 400, description = "A field breaks a rule; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such function", body = ErrorBody),
        (status = 409, description = "The function is being deleted", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    JsonBody(body): JsonBody<UpdateFunction>,
) -> ApiResult<Json<Function>> {
    // Validate against the current spec first so bad input is a 400 naming
    // the field; the backend applies the update atomically.
    let current = state.backend.get_function(&caller.namespace, &name).await?;
    body.apply_to(&current.spec)?;
    let f = state
        .backend
        .update_function(&caller.namespace, &name, body)
        .await?;
    tracing::info!(namespace = %caller.namespace, function = %name, "function updated");
    Ok(Json(f))
}

/// Deletes a function, stopping its build and process.
#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/functions/{name}",
    tag = "functions",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such function", body = ErrorBody),
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
        .delete_function(&caller.namespace, &name)
        .await?;
    tracing::info!(namespace = %caller.namespace, function = %name, "function deleted");
    Ok(StatusCode::NO_CONTENT)
}
