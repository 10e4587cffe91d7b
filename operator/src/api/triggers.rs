//! Trigger CRUD and logs: `/v1/namespaces/{ns}/triggers[/{name}[/logs]]`.
//! An http trigger's `status.url` is filled in here, from the operator's
//! public URL, so every backend returns the same absolute URL.

use super::AppState;
use super::error::ApiResult;
use super::extract::{Caller, FnName, JsonBody, parse_query};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header::CONTENT_TYPE, header::LOCATION};
use axum::response::IntoResponse;
use serde::Deserialize;
use sless_wire::ErrorBody;
use sless_wire::trigger::{CreateTrigger, Trigger, TriggerList, TriggerType, UpdateTrigger};

/// Sets `status.url` of an http trigger to its absolute public URL.
pub fn with_url(public_url: &str, mut t: Trigger) -> Trigger {
    t.status.url = match t.spec.trigger_type {
        TriggerType::Http => Some(format!(
            "{public_url}{}",
            sless_wire::paths::trigger_public(&t.namespace, &t.name)
        )),
        TriggerType::Cron => None,
    };
    t
}

/// Creates a trigger. Its function need not exist yet: the trigger waits
/// (phase Waiting) and becomes Active when the function is Ready. An http
/// trigger's `status.url` is known at once.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/triggers",
    tag = "triggers",
    params(("ns" = String, Path, description = "The caller's namespace")),
    request_body(content = CreateTrigger, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = Trigger),
        (status = 400, description = "A field breaks a rule (e.g. a bad `schedule`); `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 409, description = "A trigger with this name exists", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateTrigger>,
) -> ApiResult<(StatusCode, HeaderMap, Json<Trigger>)> {
    let (name, spec) = body.validate()?;
    state.backend.ensure_namespace(&caller.namespace).await?;
    let t = state
        .backend
        .create_trigger(&caller.namespace, &name, spec)
        .await?;
    tracing::info!(namespace = %caller.namespace, trigger = %name, "trigger created");
    let mut headers = HeaderMap::new();
    let location = format!(
        "{}{}",
        state.public_url,
        sless_wire::paths::trigger(&caller.namespace, &name)
    );
    if let Ok(v) = HeaderValue::from_str(&location) {
        headers.insert(LOCATION, v);
    }
    Ok((
        StatusCode::CREATED,
        headers,
        Json(with_url(&state.public_url, t)),
    ))
}

/// Reads one trigger, with its phase as of now.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    tag = "triggers",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Trigger name"),
    ),
    responses(
        (status = 200, description = "The trigger", body = Trigger),
        (status = 400, description = "Bad name", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such trigger", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
) -> ApiResult<Json<Trigger>> {
    let t = state.backend.get_trigger(&caller.namespace, &name).await?;
    Ok(Json(with_url(&state.public_url, t)))
}

/// Lists the namespace's triggers, sorted by name.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/triggers",
    tag = "triggers",
    params(("ns" = String, Path, description = "The caller's namespace")),
    responses(
        (status = 200, description = "The triggers", body = TriggerList),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<TriggerList>> {
    let items = match state.backend.list_triggers(&caller.namespace).await {
        Ok(items) => items,
        Err(crate::Error::NotFound {
            kind: "namespace", ..
        }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let items = items
        .into_iter()
        .map(|t| with_url(&state.public_url, t))
        .collect();
    Ok(Json(TriggerList { items }))
}

/// Applies a partial update (absent fields are kept); a new schedule,
/// payload, function or `enabled` takes effect at once.
#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    tag = "triggers",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Trigger name"),
    ),
    request_body(content = UpdateTrigger, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated trigger", body = Trigger),
        (status = 400, description = "A field breaks a rule; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such trigger", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    JsonBody(body): JsonBody<UpdateTrigger>,
) -> ApiResult<Json<Trigger>> {
    // Validate against the current spec first so bad input is a 400 naming the field.
    let current = state.backend.get_trigger(&caller.namespace, &name).await?;
    body.apply_to(&current.spec)?;
    let t = state
        .backend
        .update_trigger(&caller.namespace, &name, body)
        .await?;
    tracing::info!(namespace = %caller.namespace, trigger = %name, "trigger updated");
    Ok(Json(with_url(&state.public_url, t)))
}

/// Deletes a trigger: its public URL answers 404 and no cron run starts
/// after this returns.
#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/triggers/{name}",
    tag = "triggers",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Trigger name"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such trigger", body = ErrorBody),
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
        .delete_trigger(&caller.namespace, &name)
        .await?;
    tracing::info!(namespace = %caller.namespace, trigger = %name, "trigger deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// Query of the trigger log endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerLogQuery {
    /// Only the last N lines.
    #[serde(default)]
    pub tail: Option<usize>,
}

/// The trigger's log: creation, updates, each cron run's start and outcome,
/// skipped ticks and ticks not run because the function was not Ready.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/triggers/{name}/logs",
    tag = "triggers",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Trigger name"),
        ("tail" = Option<usize>, Query, description = "Only the last N lines"),
    ),
    responses(
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such trigger", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn logs(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    uri: Uri,
) -> ApiResult<impl IntoResponse> {
    let q: TriggerLogQuery = parse_query(uri.query())?;
    let text = state
        .backend
        .read_trigger_logs(&caller.namespace, &name, q.tail)
        .await?;
    Ok(([(CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}
