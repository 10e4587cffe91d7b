//! The JSON error body every non-2xx answer of the operator carries.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Machine-readable error kinds. The HTTP status is given alongside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: a field breaks a validation rule (`field` names it).
    InvalidField,
    /// 400: a required field is absent (`field` names it).
    MissingField,
    /// 400: the request is malformed in a way no single field explains.
    BadRequest,
    /// 401: no token, or a token that fails verification.
    Unauthorized,
    /// 403: a valid token for another namespace.
    Forbidden,
    /// 404: no such object.
    NotFound,
    /// 409: an object with this name already exists.
    AlreadyExists,
    /// 409: the object is not in a state that allows this (e.g. being deleted).
    Conflict,
    /// 413: the body is larger than the limit.
    PayloadTooLarge,
    /// 415: the body has the wrong media type.
    UnsupportedMediaType,
    /// 502: the function's process failed to answer.
    UpstreamFailed,
    /// 503: the function is not ready to serve yet.
    NotReady,
    /// 504: the function did not answer within its timeout.
    UpstreamTimeout,
    /// 500: a fault of the operator itself (never caused by input).
    Internal,
    /// 501: the backend does not support this operation.
    NotImplemented,
    /// 507: the operator's disk is full; the request was not carried out.
    InsufficientStorage,
}

/// One error: its kind, a message for people, and the field at fault if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiError {
    /// What kind of error this is.
    pub code: ErrorCode,
    /// A message that says what went wrong and what to do.
    pub message: String,
    /// The request field at fault, e.g. `memory_mb` or `env_vars.FOO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The body of every error answer: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ApiError,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} (field {field})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl From<crate::validate::FieldError> for ApiError {
    fn from(e: crate::validate::FieldError) -> Self {
        ApiError {
            code: if e.missing {
                ErrorCode::MissingField
            } else {
                ErrorCode::InvalidField
            },
            message: e.to_string(),
            field: Some(e.field),
        }
    }
}
