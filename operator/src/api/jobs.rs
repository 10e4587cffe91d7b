//! Jobs: create, get, list, partial update (a change reruns), delete, code
//! upload (new code runs) and logs. Validation is `CreateJob::validate` and
//! `UpdateJob::apply_to`: bad input is a 400 naming the field.

use super::AppState;
use super::error::ApiResult;
use super::extract::{Caller, FnName, JsonBody, parse_query};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header::CONTENT_TYPE, header::LOCATION};
use axum::response::IntoResponse;
use sless_wire::function::LogQuery;
use sless_wire::{CreateJob, ErrorBody, Job, JobList, UpdateJob};

/// Creates a job (phase Pending until code is uploaded; generation 1). The
/// namespace is ensured first.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/jobs",
    tag = "jobs",
    params(("ns" = String, Path, description = "The caller's namespace")),
    request_body(content = CreateJob, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = Job),
        (status = 400, description = "A field breaks a rule (e.g. `input` is not JSON); `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 409, description = "A job with this name exists", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateJob>,
) -> ApiResult<(StatusCode, HeaderMap, Json<Job>)> {
    let (name, spec) = body.validate()?;
    state.backend.ensure_namespace(&caller.namespace).await?;
    let job = state
        .backend
        .create_job(&caller.namespace, &name, spec)
        .await?;
    tracing::info!(namespace = %caller.namespace, job = %name, "job created");
    let mut headers = HeaderMap::new();
    let location = format!(
        "{}{}",
        state.public_url,
        sless_wire::paths::job(&caller.namespace, &name)
    );
    if let Ok(v) = HeaderValue::from_str(&location) {
        headers.insert(LOCATION, v);
    }
    Ok((StatusCode::CREATED, headers, Json(job)))
}

/// Reads one job: wait until `status.observed_generation == generation` and
/// the phase is Succeeded or Failed.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    tag = "jobs",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Job name"),
    ),
    responses(
        (status = 200, description = "The job", body = Job),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
) -> ApiResult<Json<Job>> {
    Ok(Json(state.backend.get_job(&caller.namespace, &name).await?))
}

/// Lists the namespace's jobs, sorted by name.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/jobs",
    tag = "jobs",
    params(("ns" = String, Path, description = "The caller's namespace")),
    responses(
        (status = 200, description = "The jobs", body = JobList),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<JobList>> {
    let items = match state.backend.list_jobs(&caller.namespace).await {
        Ok(items) => items,
        Err(crate::Error::NotFound {
            kind: "namespace", ..
        }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(JobList { items }))
}

/// Applies a partial update. Any change (input, run_id, env, ...) bumps the
/// generation and runs the job again; the same values change nothing.
#[utoipa::path(
    patch,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    tag = "jobs",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Job name"),
    ),
    request_body(content = UpdateJob, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated job", body = Job),
        (status = 400, description = "A field breaks a rule; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    JsonBody(body): JsonBody<UpdateJob>,
) -> ApiResult<Json<Job>> {
    let current = state.backend.get_job(&caller.namespace, &name).await?;
    body.apply_to(&current.spec)?;
    let job = state
        .backend
        .update_job(&caller.namespace, &name, body)
        .await?;
    tracing::info!(namespace = %caller.namespace, job = %name, generation = job.generation, "job updated");
    Ok(Json(job))
}

/// Deletes a job, killing a running build or run.
#[utoipa::path(
    delete,
    path = "/v1/namespaces/{ns}/jobs/{name}",
    tag = "jobs",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Job name"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
) -> ApiResult<StatusCode> {
    state.backend.delete_job(&caller.namespace, &name).await?;
    tracing::info!(namespace = %caller.namespace, job = %name, "job deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// Stores the job's code zip. New code bumps the generation: the job is
/// built (once per code version) and run; the same code again changes nothing.
#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/jobs/{name}/code",
    tag = "jobs",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Job name"),
        ("sha256" = String, Query, description = "sha256 (hex) of the zip body; the operator verifies it (400 if it differs)"),
        ("source_hash" = Option<String>, Query, description = "Optional client-side hash of the source content, stored as given"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "application/zip", description = "The code zip (at most 64 MiB)"),
    responses(
        (status = 202, description = "Code stored; the build and run go on in the background", body = Job),
        (status = 400, description = "Bad sha256 or unsafe/unreadable zip; `error.field` names the field", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
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
) -> ApiResult<(StatusCode, Json<Job>)> {
    let code = super::code::receive(&uri, &headers, body).await?;
    tracing::info!(namespace = %caller.namespace, job = %name, sha256 = %code.sha256, "job code uploaded");
    let job = state
        .backend
        .upload_job_code(&caller.namespace, &name, code)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// The job's build log (default) or the output of its last run, as text.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/jobs/{name}/logs",
    tag = "jobs",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Job name"),
        ("kind" = Option<sless_wire::function::LogKind>, Query, description = "`build` (default) or `run`: the last run's stdout and stderr"),
        ("tail" = Option<usize>, Query, description = "Only the last N lines"),
    ),
    responses(
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
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
        .read_job_logs(&caller.namespace, &name, q.kind, q.tail)
        .await?;
    Ok(([(CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}
