//! The one place where errors become HTTP answers: a status and an
//! [`ErrorBody`] (`{"error": {"code", "message", "field"}}`).

use crate::Error;
use crate::auth::AuthError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sless_wire::{ApiError, ErrorBody, ErrorCode, FieldError};

/// An error answer: status plus JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body's error.
    pub error: ApiError,
}

impl ApiFailure {
    /// An answer with no field.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiFailure {
        ApiFailure {
            status,
            error: ApiError {
                code,
                message: message.into(),
                field: None,
            },
        }
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> ApiFailure {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    /// 400 `invalid_field` naming `field`.
    pub fn invalid_field(field: impl Into<String>, message: impl Into<String>) -> ApiFailure {
        FieldError::invalid(field, message).into()
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiFailure {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> ApiFailure {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> ApiFailure {
        Self::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
    }

    /// 413 `payload_too_large`.
    pub fn too_large(what: &str, limit: usize) -> ApiFailure {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
            format!("{what} is larger than the limit of {limit} bytes"),
        )
    }

    /// 500 `internal` with a generic message (the detail belongs in logs).
    pub fn internal() -> ApiFailure {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error in the operator; see its log",
        )
    }
}

impl From<FieldError> for ApiFailure {
    fn from(e: FieldError) -> Self {
        ApiFailure {
            status: StatusCode::BAD_REQUEST,
            error: e.into(),
        }
    }
}

impl From<AuthError> for ApiFailure {
    fn from(e: AuthError) -> Self {
        ApiFailure::unauthorized(e.to_string())
    }
}

/// Whether an I/O error says the disk (or the user's quota) is full.
fn io_disk_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Whether the operator failed because its data dir is out of space.
fn disk_full(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => io_disk_full(source),
        Error::BadZip(crate::codezip::ZipError::Io { source, .. }) => io_disk_full(source),
        Error::Storage(rusqlite::Error::SqliteFailure(f, _)) => {
            f.code == rusqlite::ErrorCode::DiskFull
        }
        _ => false,
    }
}

impl From<Error> for ApiFailure {
    fn from(e: Error) -> Self {
        use ErrorCode as C;
        use StatusCode as S;
        if disk_full(&e) {
            tracing::error!(error = %e, "out of disk space");
            return ApiFailure::new(
                S::INSUFFICIENT_STORAGE,
                C::InsufficientStorage,
                "the operator is out of disk space (its data dir is full), so this request \
                 was not carried out and nothing stored was changed; free space on the \
                 operator's machine and retry",
            );
        }
        match e {
            Error::Invalid(f) => f.into(),
            Error::BadRequest(m) => ApiFailure::bad_request(m),
            e @ Error::BadZip(crate::codezip::ZipError::Io { .. }) => {
                tracing::error!(error = %e, "internal error");
                ApiFailure::internal()
            }
            e @ Error::BadZip(_) => ApiFailure {
                status: S::BAD_REQUEST,
                error: ApiError {
                    code: C::InvalidField,
                    message: e.to_string(),
                    field: Some("code".to_string()),
                },
            },
            e @ Error::NotFound { .. } => ApiFailure::new(S::NOT_FOUND, C::NotFound, e.to_string()),
            e @ Error::AlreadyExists { .. } => {
                ApiFailure::new(S::CONFLICT, C::AlreadyExists, e.to_string())
            }
            Error::Conflict(m) => ApiFailure::new(S::CONFLICT, C::Conflict, m),
            e @ Error::PayloadTooLarge { .. } => {
                ApiFailure::new(S::PAYLOAD_TOO_LARGE, C::PayloadTooLarge, e.to_string())
            }
            Error::NotReady(m) => ApiFailure::new(S::SERVICE_UNAVAILABLE, C::NotReady, m),
            Error::Unsupported(m) => ApiFailure::new(S::NOT_IMPLEMENTED, C::NotImplemented, m),
            e @ (Error::Storage(_)
            | Error::Io { .. }
            | Error::StateDatabase(_)
            | Error::Internal(_)) => {
                tracing::error!(error = %e, "internal error");
                ApiFailure::internal()
            }
        }
    }
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.error)
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.error })).into_response()
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiFailure>;

#[cfg(test)]
mod tests {
    use super::*;

    fn status(e: Error) -> (u16, ErrorCode) {
        let f = ApiFailure::from(e);
        (f.status.as_u16(), f.error.code)
    }

    #[test]
    fn every_error_has_its_status() {
        assert_eq!(
            status(Error::Invalid(FieldError::invalid(
                "memory_mb",
                "too small"
            ))),
            (400, ErrorCode::InvalidField)
        );
        assert_eq!(
            status(Error::Invalid(FieldError::missing("name"))),
            (400, ErrorCode::MissingField)
        );
        assert_eq!(
            status(Error::BadRequest("x".into())),
            (400, ErrorCode::BadRequest)
        );
        assert_eq!(
            status(Error::BadZip(crate::codezip::ZipError::NotAZip("x".into()))),
            (400, ErrorCode::InvalidField)
        );
        assert_eq!(
            status(Error::function_not_found("ns", "f")),
            (404, ErrorCode::NotFound)
        );
        assert_eq!(
            status(Error::AlreadyExists {
                kind: "function",
                namespace: "ns".into(),
                name: "f".into()
            }),
            (409, ErrorCode::AlreadyExists)
        );
        assert_eq!(
            status(Error::Conflict("x".into())),
            (409, ErrorCode::Conflict)
        );
        assert_eq!(
            status(Error::PayloadTooLarge {
                what: "body",
                size: 2,
                limit: 1
            }),
            (413, ErrorCode::PayloadTooLarge)
        );
        assert_eq!(
            status(Error::NotReady("building".into())),
            (503, ErrorCode::NotReady)
        );
        assert_eq!(
            status(Error::Unsupported("x".into())),
            (501, ErrorCode::NotImplemented)
        );
        assert_eq!(
            status(Error::Internal("x".into())),
            (500, ErrorCode::Internal)
        );
    }

    #[test]
    fn a_full_disk_is_507_and_says_so() {
        let enospc = || std::io::Error::from_raw_os_error(libc::ENOSPC);
        for e in [
            Error::Io {
                context: "writing /data/code/x.zip".into(),
                source: enospc(),
            },
            Error::BadZip(crate::codezip::ZipError::Io {
                path: "/data/builds/x".into(),
                source: enospc(),
            }),
            Error::Storage(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                None,
            )),
        ] {
            let f = ApiFailure::from(e);
            assert_eq!(f.status.as_u16(), 507);
            assert_eq!(f.error.code, ErrorCode::InsufficientStorage);
            assert!(f.error.message.contains("out of disk space"));
            assert!(!f.error.message.contains("/data"), "{}", f.error.message);
        }
        // Other I/O faults stay 500.
        let f = ApiFailure::from(Error::Io {
            context: "x".into(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        });
        assert_eq!(f.status.as_u16(), 500);
    }

    #[test]
    fn internal_details_stay_out_of_the_body() {
        let f = ApiFailure::from(Error::Io {
            context: "writing /secret/path".into(),
            source: std::io::Error::other("disk full"),
        });
        assert_eq!(f.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!f.error.message.contains("/secret/path"));
        assert!(!f.error.message.contains("disk full"));
    }

    #[test]
    fn field_errors_name_the_field() {
        let f = ApiFailure::from(Error::Invalid(FieldError::invalid("timeout_sec", "bad")));
        assert_eq!(f.error.field.as_deref(), Some("timeout_sec"));
        let f = ApiFailure::from(AuthError::Expired);
        assert_eq!(f.status, StatusCode::UNAUTHORIZED);
        assert_eq!(f.error.code, ErrorCode::Unauthorized);
        assert!(f.error.message.contains("expired"));
    }
}
