//! `PUT /v1/namespaces/{ns}/functions/{name}/code`: upload a code zip.

use super::AppState;
use super::error::{ApiFailure, ApiResult};
use super::extract::{Caller, FnName, content_length, parse_query, read_limited};
use crate::backend::CodeBundle;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use sha2::{Digest, Sha256};
use sless_wire::limits::CODE_ZIP_MAX_BYTES;
use sless_wire::{CodeUpload, ErrorBody, Function};

/// Stores a code zip and starts a build (once per code version). The body is
/// the zip; `sha256` in the query must be its sha256 (hex).
#[utoipa::path(
    put,
    path = "/v1/namespaces/{ns}/functions/{name}/code",
    tag = "functions",
    params(
        ("ns" = String, Path, description = "The caller's namespace"),
        ("name" = String, Path, description = "Function name"),
        ("sha256" = String, Query, description = "sha256 (hex) of the zip body; the operator verifies it (400 if it differs)"),
        ("source_hash" = Option<String>, Query, description = "Optional client-side hash of the source content, stored as given"),
    ),
    request_body(content = inline(super::openapi::BinaryBody), content_type = "application/zip", description = "The code zip (at most 64 MiB)"),
    responses(
        (status = 202, description = "Code stored; the build runs in the background", body = Function),
        (status = 400, description = "Bad sha256 or unsafe/unreadable zip; `error.field` names the field", body = ErrorBody),
        (status = 401, description = "Missing or invalid token", body = ErrorBody),
        (status = 403, description = "The token is for another namespace", body = ErrorBody),
        (status = 404, description = "No such function", body = ErrorBody),
        (status = 413, description = "The zip is over the size limit", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    FnName(name): FnName,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Function>)> {
    let code = receive(&uri, &headers, body).await?;
    tracing::info!(
        namespace = %caller.namespace,
        function = %name,
        sha256 = %code.sha256,
        bytes = code.zip.len(),
        "code uploaded"
    );
    let f = state
        .backend
        .upload_code(&caller.namespace, &name, code)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(f)))
}

/// Reads and verifies a code upload, for functions, jobs and services alike:
/// `sha256` in the query (64 hex, 400 `sha256`), the body at most
/// `CODE_ZIP_MAX_BYTES` (413), its sha256 equal to the claim (400 `sha256`),
/// and a zip `codezip::inspect` accepts (400 `code`).
pub async fn receive(
    uri: &Uri,
    headers: &axum::http::HeaderMap,
    body: Body,
) -> ApiResult<CodeBundle> {
    let query: CodeUpload = parse_query(uri.query())?;
    let claimed = query.sha256.trim().to_ascii_lowercase();
    if claimed.len() != 64 || !claimed.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiFailure::invalid_field(
            "sha256",
            "must be the sha256 of the zip as 64 hex characters",
        ));
    }
    // A declared length far over the limit is refused without reading.
    if content_length(headers).is_some_and(|n| n > 2 * CODE_ZIP_MAX_BYTES as u64) {
        return Err(ApiFailure::too_large("the code zip", CODE_ZIP_MAX_BYTES));
    }
    let mut hasher = Sha256::new();
    let zip = read_limited(body, CODE_ZIP_MAX_BYTES, "the code zip", |c| {
        hasher.update(c)
    })
    .await?;
    let actual = hex::encode(hasher.finalize());
    if actual != claimed {
        return Err(ApiFailure::invalid_field(
            "sha256",
            format!(
                "does not match the body: the body's sha256 is {actual}, the query says {claimed}"
            ),
        ));
    }
    let inspected = zip.clone();
    let summary = tokio::task::spawn_blocking(move || crate::codezip::inspect(&inspected))
        .await
        .map_err(|e| crate::Error::Internal(format!("zip inspection task: {e}")))?
        .map_err(crate::Error::BadZip)?;
    tracing::debug!(entries = summary.entries, "code zip inspected");
    Ok(CodeBundle {
        zip,
        sha256: actual,
        source_hash: query.source_hash,
    })
}
