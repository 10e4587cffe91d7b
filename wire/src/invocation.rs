//! The invocation log: one record per proxied function call (the invoke URL,
//! an http trigger's public URL, a cron run), and the query that reads it.
//! A record never holds a body, a header or a token.

use crate::validate::{self, FieldError};
use serde::{Deserialize, Serialize};

/// Records returned when the query names no `limit`.
pub const LIMIT_DEFAULT: usize = 100;
/// Largest `limit` of one query.
pub const LIMIT_MAX: usize = 1000;

/// What made the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InvocationSource {
    /// The authenticated invoke URL (`/v1/namespaces/{ns}/functions/{name}/invoke`).
    Invoke,
    /// The public URL of an http trigger (`/t/{ns}/{trigger}`).
    HttpTrigger,
    /// A run of a cron trigger.
    Cron,
}

impl InvocationSource {
    /// `invoke`, `http_trigger` or `cron`.
    pub fn as_str(self) -> &'static str {
        match self {
            InvocationSource::Invoke => "invoke",
            InvocationSource::HttpTrigger => "http_trigger",
            InvocationSource::Cron => "cron",
        }
    }

    /// The source named by [`InvocationSource::as_str`], if any.
    pub fn parse(s: &str) -> Option<InvocationSource> {
        match s {
            "invoke" => Some(InvocationSource::Invoke),
            "http_trigger" => Some(InvocationSource::HttpTrigger),
            "cron" => Some(InvocationSource::Cron),
            _ => None,
        }
    }
}

/// One proxied call of a function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Invocation {
    /// RFC 3339 time the operator received the call.
    pub time: String,
    /// Namespace of the function.
    pub namespace: String,
    /// The function called.
    pub function: String,
    /// What made the call.
    pub source: InvocationSource,
    /// The trigger's name (http_trigger and cron calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// HTTP method.
    pub method: String,
    /// The path the function saw (after the invoke or trigger URL), without
    /// the query string.
    pub path: String,
    /// HTTP status of the answer: the function's, or the operator's own
    /// (413 body too large, 502 process failed, 504 timeout).
    pub status: u16,
    /// Milliseconds from receiving the call until the answer was streamed
    /// back (or the caller went away).
    pub duration_ms: u64,
    /// The call's `X-Request-Id` (the caller's, or the one the operator added).
    pub request_id: String,
    /// Size of the request body in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// Size of the response body in bytes as streamed to the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
}

/// Answer of `GET /v1/namespaces/{ns}/invocations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InvocationList {
    /// Records, newest first.
    pub items: Vec<Invocation>,
}

/// Query of `GET /v1/namespaces/{ns}/invocations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
pub struct InvocationQuery {
    /// Only calls of this function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Most records returned: 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

impl InvocationQuery {
    /// Checks the query and returns the function filter and the limit, or
    /// the parameter that breaks a rule (`function`, `limit`).
    pub fn validate(&self) -> Result<(Option<&str>, usize), FieldError> {
        if let Some(f) = self.function.as_deref() {
            validate::name("function", f)?;
        }
        let limit = match self.limit {
            None => LIMIT_DEFAULT,
            Some(n) if (1..=LIMIT_MAX as u64).contains(&n) => n as usize,
            Some(n) => {
                return Err(FieldError::invalid(
                    "limit",
                    format!("{n} is out of range: must be between 1 and {LIMIT_MAX}"),
                ));
            }
        };
        Ok((self.function.as_deref(), limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_round_trip() {
        for s in [
            InvocationSource::Invoke,
            InvocationSource::HttpTrigger,
            InvocationSource::Cron,
        ] {
            assert_eq!(InvocationSource::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str())
            );
        }
        assert_eq!(InvocationSource::parse("other"), None);
    }

    #[test]
    fn query_limits_and_names() {
        let q = InvocationQuery::default();
        assert_eq!(q.validate().unwrap(), (None, LIMIT_DEFAULT));
        let q = InvocationQuery {
            function: Some("hello".into()),
            limit: Some(1000),
        };
        assert_eq!(q.validate().unwrap(), (Some("hello"), 1000));
        for bad in [0, 1001, u64::MAX] {
            let q = InvocationQuery {
                function: None,
                limit: Some(bad),
            };
            assert_eq!(q.validate().unwrap_err().field, "limit");
        }
        let q = InvocationQuery {
            function: Some("Not_A_Name".into()),
            limit: None,
        };
        assert_eq!(q.validate().unwrap_err().field, "function");
    }

    #[test]
    fn optional_fields_are_left_out() {
        let inv = Invocation {
            time: "2026-12-02T10:00:00.000Z".into(),
            namespace: "sless-12345678".into(),
            function: "hello".into(),
            source: InvocationSource::Invoke,
            trigger: None,
            method: "POST".into(),
            path: "/".into(),
            status: 200,
            duration_ms: 3,
            request_id: "abc".into(),
            request_bytes: None,
            response_bytes: Some(12),
        };
        let v = serde_json::to_value(&inv).unwrap();
        assert!(v.get("trigger").is_none() && v.get("request_bytes").is_none());
        assert_eq!(v["source"], "invoke");
        assert_eq!(serde_json::from_value::<Invocation>(v).unwrap(), inv);
    }
}
