//! `GET /v1/namespaces/{ns}/functions/{name}/logs?kind=build|run&tail=N`.

use super::AppState;
use super::error::ApiResult;
use super::extract::{Caller, FnName, parse_query};
use axum::extract::State;
use axum::http::{Uri, header::CONTENT_TYPE};
use axum::response::IntoResponse;
use sless_wire::ErrorBody;
use sless_wire::function::LogQuery;

/// The function's build log (default) or run log as plain text.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/functions/{name}/logs",
    tag = "functions",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
        ("kind" = Option<sless_wire::function::LogKind>, Query, description = "`build` (default): the last build's output; `run`: the process's stdout and stderr"),
        ("tail" = Option<usize>, Query, description = "Only the last N lines"),
    ),
    responses(
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such function", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn read(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    uri: Uri,
) -> ApiResult<impl IntoResponse> {
    let q: LogQuery = parse_query(uri.query())?;
    let text = state
        .backend
        .read_logs(&caller.namespace, &name, q.kind, q.tail)
        .await?;
    Ok(([(CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}
