//! Request extractors: the authenticated caller (401/403), the function name
//! in the path, JSON bodies and query strings. Every rejection is an
//! [`ApiFailure`] (JSON, naming the field where there is one), never axum's
//! default plain-text 4xx.

use super::AppState;
use super::error::{ApiFailure, ApiResult};
use crate::auth::Principal;
use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use serde::de::DeserializeOwned;
use sless_wire::FieldError;
use std::time::{Duration, Instant};

/// The authenticated caller, allowed to act on the `{ns}` of the path.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Who the token says the caller is.
    pub principal: Principal,
    /// The namespace of the path, equal to `principal.namespace`.
    pub namespace: String,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiFailure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Caller> {
        let header = match parts.headers.get(AUTHORIZATION) {
            None => None,
            Some(v) => Some(v.to_str().map_err(|_| {
                ApiFailure::unauthorized("malformed token: the Authorization header is not ASCII")
            })?),
        };
        let principal = match state.auth.verify_header(header).await {
            Ok(p) => p,
            Err(e) => {
                tracing::info!(reason = %e, path = %parts.uri.path(), "request not authenticated");
                return Err(e.into());
            }
        };
        let ns = path_param(parts, state, "ns").await?;
        if ns != principal.namespace {
            tracing::info!(sub_namespace = %principal.namespace, path_namespace = %ns, "namespace forbidden");
            return Err(ApiFailure::forbidden(format!(
                "your token grants namespace {}, not {ns}",
                principal.namespace
            )));
        }
        Ok(Caller {
            principal,
            namespace: ns,
        })
    }
}

/// A function name from the path, checked to be a DNS-1123 label (400 `name`).
#[derive(Debug, Clone)]
pub struct FnName(pub String);

impl FromRequestParts<AppState> for FnName {
    type Rejection = ApiFailure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<FnName> {
        let name = path_param(parts, state, "name").await?;
        sless_wire::validate::name("name", &name)?;
        Ok(FnName(name))
    }
}

async fn path_param(parts: &mut Parts, state: &AppState, key: &str) -> ApiResult<String> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiFailure::bad_request(format!("bad path: {e}")))?;
    params
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
        .ok_or_else(|| ApiFailure::bad_request(format!("the path has no {{{key}}}")))
}

/// A JSON body of type `T`: `content-type: application/json` required, at most
/// `limits::JSON_BODY_MAX_BYTES`, type errors name the field.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiFailure;

    async fn from_request(req: Request, _state: &AppState) -> ApiResult<JsonBody<T>> {
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !content_type.as_deref().is_some_and(is_json_type) {
            return Err(ApiFailure::bad_request(match content_type {
                None => "missing content-type: send the body as JSON with `content-type: application/json`".to_string(),
                Some(t) => format!(
                    "content-type must be application/json, not {:?}",
                    t.chars().take(100).collect::<String>()
                ),
            }));
        }
        let limit = sless_wire::limits::JSON_BODY_MAX_BYTES;
        let bytes = read_limited(req.into_body(), limit, "the JSON body", |_| {}).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

fn is_json_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Parses a JSON object into `T`: syntax errors are 400 `bad_request`, type errors 400
/// `invalid_field` naming the field (`memory_mb`, `env_vars.FOO`), a missing
/// non-optional field 400 `missing_field`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiFailure::bad_request(
            "invalid JSON: the request body is empty",
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiFailure::bad_request(format!("invalid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiFailure::bad_request(
            "the request body must be a JSON object",
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        field_failure(&path, &e.into_inner().to_string())
    })
}

/// Parses a query string into `T`, naming the parameter at fault.
pub fn parse_query<T: DeserializeOwned>(query: Option<&str>) -> ApiResult<T> {
    let de =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.unwrap_or("").as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        let mut f = field_failure(&path, &message);
        f.error.message = format!("bad query parameter: {}", f.error.message);
        f
    })
}

fn field_failure(path: &str, message: &str) -> ApiFailure {
    if path.is_empty() || path == "." {
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
        {
            return FieldError::missing(field).into();
        }
        return ApiFailure::bad_request(message.to_string());
    }
    ApiFailure::invalid_field(path, message.to_string())
}

/// How long an oversized body is drained so the client can read the 413.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Reads a body of at most `limit` bytes, calling `on_chunk` for every chunk
/// (e.g. to hash it). Past the limit it answers 413 after draining (a bounded
/// amount of) the rest, so the client sees the answer instead of a reset.
pub async fn read_limited(
    body: Body,
    limit: usize,
    what: &str,
    mut on_chunk: impl FnMut(&[u8]),
) -> ApiResult<Bytes> {
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiFailure::bad_request(format!("reading {what}: {e}")))?;
        if buf.len() + chunk.len() > limit {
            let mut drained = buf.len() + chunk.len();
            let started = Instant::now();
            while drained <= limit.saturating_mul(2) && started.elapsed() < DRAIN_TIME {
                match tokio::time::timeout(DRAIN_TIME, stream.next()).await {
                    Ok(Some(Ok(c))) => drained += c.len(),
                    _ => break,
                }
            }
            return Err(ApiFailure::too_large(what, limit));
        }
        on_chunk(&chunk);
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// The request's declared `Content-Length`, if any and valid.
pub fn content_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sless_wire::function::{LogKind, LogQuery};
    use sless_wire::{CodeUpload, CreateFunction, ErrorCode};

    #[test]
    fn json_type_errors_name_the_field() {
        let e = parse_json::<CreateFunction>(br#"{"name":"a","memory_mb":"lots"}"#).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert_eq!(e.error.field.as_deref(), Some("memory_mb"));
        assert_eq!(e.error.code, ErrorCode::InvalidField);
        let e = parse_json::<CreateFunction>(br#"{"env_vars":{"A":1}}"#).unwrap_err();
        assert_eq!(e.error.field.as_deref(), Some("env_vars.A"));
    }

    #[test]
    fn json_syntax_errors_are_bad_requests() {
        let e = parse_json::<CreateFunction>(b"{not json").unwrap_err();
        assert_eq!(e.error.code, ErrorCode::BadRequest);
        assert!(e.error.message.contains("invalid JSON"));
        let e = parse_json::<CreateFunction>(b"").unwrap_err();
        assert!(e.error.message.contains("empty"));
        let e = parse_json::<CreateFunction>(b"[1]").unwrap_err();
        assert_eq!(e.error.code, ErrorCode::BadRequest);
    }

    #[test]
    fn query_errors_name_the_parameter() {
        let q: LogQuery = parse_query(Some("kind=run&tail=5")).unwrap();
        assert_eq!(q.kind, LogKind::Run);
        assert_eq!(q.tail, Some(5));
        let q: LogQuery = parse_query(None).unwrap();
        assert_eq!(q.kind, LogKind::Build);
        let e = parse_query::<LogQuery>(Some("tail=x")).unwrap_err();
        assert_eq!(e.error.field.as_deref(), Some("tail"));
        let e = parse_query::<LogQuery>(Some("kind=nope")).unwrap_err();
        assert_eq!(e.error.field.as_deref(), Some("kind"));
        let e = parse_query::<CodeUpload>(Some("source_hash=x")).unwrap_err();
        assert_eq!(e.error.field.as_deref(), Some("sha256"));
        assert_eq!(e.error.code, ErrorCode::MissingField);
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_type("application/json"));
        assert!(is_json_type("Application/JSON; charset=utf-8"));
        assert!(is_json_type("application/merge-patch+json"));
        assert!(!is_json_type("text/plain"));
        assert!(!is_json_type("application/x-www-form-urlencoded"));
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_413() {
        let body = Body::from(vec![0u8; 100]);
        let e = read_limited(body, 10, "the body", |_| {})
            .await
            .unwrap_err();
        assert_eq!(e.status.as_u16(), 413);
        let mut seen = 0;
        let ok = read_limited(Body::from(vec![1u8; 10]), 10, "the body", |c| {
            seen += c.len()
        })
        .await
        .unwrap();
        assert_eq!((ok.len(), seen), (10, 10));
    }
}
