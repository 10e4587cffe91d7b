//! `GET /v1/namespaces/{ns}/invocations?function=&limit=`: the invocation log
//! of the caller's namespace (see [`crate::invocations`]), newest first.

use super::AppState;
use super::error::{ApiFailure, ApiResult};
use super::extract::{Caller, parse_query};
use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use sless_wire::{ErrorBody, InvocationList, InvocationQuery};

/// The newest proxied calls of the namespace's functions: the invoke URL,
/// http triggers and cron runs, with status, duration and request id (never
/// bodies, headers or query strings). History outlives a deleted function;
/// the operator keeps the newest 10,000 records per namespace.
#[utoipa::path(
    get,
    path = "/v1/namespaces/{ns}/invocations",
    operation_id = "list_invocations",
    tag = "invocations",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("function" = Option<String>, Query, description = "Only calls of this function"),
        ("limit" = Option<u64>, Query, description = "Most records returned: 1 to 1000 (default 100)"),
    ),
    responses(
        (status = 200, description = "Records, newest first", body = InvocationList),
        (status = 400, description = "Bad `function` or `limit`; `error.field` names it", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 501, description = "This process has no invocation log", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(_state): State<AppState>,
    caller: Caller,
    uri: Uri,
) -> ApiResult<Json<InvocationList>> {
    let q: InvocationQuery = parse_query(uri.query())?;
    let (function, limit) = q.validate()?;
    let log = crate::invocations::installed().ok_or_else(|| {
        ApiFailure::from(crate::Error::Unsupported(
            "this operator process has no invocation log".into(),
        ))
    })?;
    let items = log
        .query(&caller.namespace, function, limit)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot read the invocation log");
            ApiFailure::internal()
        })?;
    Ok(Json(InvocationList { items }))
}
