//! `POST /v1/namespaces/{ns}/ensure`.

use super::AppState;
use super::error::ApiResult;
use super::extract::Caller;
use axum::Json;
use axum::extract::State;
use sless_wire::NamespaceInfo;

/// Creates the caller's namespace if missing (idempotent).
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/ensure",
    tag = "namespaces",
    params(("ns" = String, Path, description = "The caller's namespace: `sless-` + the first 8 hex characters of sha256(sub)")),
    responses(
        (status = 200, description = "The namespace exists", body = NamespaceInfo),
        (status = 401, description = "Missing or invalid token", body = sless_wire::ErrorBody),
        (status = 403, description = "The token is for another namespace", body = sless_wire::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn ensure(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<NamespaceInfo>> {
    let info = state.backend.ensure_namespace(&caller.namespace).await?;
    if info.created {
        tracing::info!(namespace = %info.namespace, "namespace created");
    }
    Ok(Json(info))
}
