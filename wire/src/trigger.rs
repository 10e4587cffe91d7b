//! Triggers: what calls a function. `http` gives the function a public URL;
//! `cron` calls it on a schedule.

use crate::validate::{self, FieldError};
use serde::{Deserialize, Serialize};

/// Kind of trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TriggerType {
    /// A public URL on the operator (no token) proxied to the function.
    Http,
    /// Calls the function on a cron schedule, never two runs at once.
    Cron,
}

impl TriggerType {
    /// `http` or `cron`.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerType::Http => "http",
            TriggerType::Cron => "cron",
        }
    }
}

/// Body of `POST /v1/namespaces/{ns}/triggers`. Required fields are `Option`
/// so a missing one gets a 400 naming it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateTrigger {
    /// Trigger name, a DNS-1123 label. Required.
    pub name: Option<String>,
    /// Name of a function in the same namespace. Required.
    pub function: Option<String>,
    /// `http` or `cron`. Required.
    #[serde(rename = "type")]
    pub trigger_type: Option<String>,
    /// Cron schedule (cron only; required there, refused for http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// JSON text sent as the body of cron invocations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Default true. A disabled http trigger answers 404; a disabled cron trigger does not fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Body of `PATCH /v1/namespaces/{ns}/triggers/{name}`: absent fields are kept.
/// The type cannot change (the provider replaces the trigger instead).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateTrigger {
    /// New target function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// New schedule (cron only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// New payload (cron only). An empty string clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Enable or disable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// The desired state of a trigger, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerSpec {
    /// Target function name.
    pub function: String,
    /// Kind.
    #[serde(rename = "type")]
    pub trigger_type: TriggerType,
    /// Cron schedule (cron only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// JSON text sent to cron invocations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Whether the trigger fires / serves.
    pub enabled: bool,
}

/// Lifecycle phase of a trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TriggerPhase {
    /// Serving (http) or scheduled (cron), and the function is Ready.
    Active,
    /// Waiting for its function to become Ready (or to exist again); `message` says which.
    Waiting,
    /// `enabled = false`.
    Disabled,
}

/// The outcome of one cron run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerRun {
    /// RFC 3339 start time.
    pub started_at: String,
    /// RFC 3339 end time.
    pub completed_at: String,
    /// HTTP status the function answered, if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// True for a 2xx answer.
    pub ok: bool,
    /// Error or a short excerpt of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the operator observed about a trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerStatus {
    /// Phase.
    pub phase: TriggerPhase,
    /// Why it is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Public URL (http triggers), absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// RFC 3339 time of the next scheduled run (cron).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<String>,
    /// The last finished run (cron).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<TriggerRun>,
    /// Runs started so far (cron).
    #[serde(default)]
    pub runs: u64,
    /// Ticks skipped because the previous run was still going (cron).
    #[serde(default)]
    pub skipped: u64,
}

/// A trigger as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Trigger {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Desired state.
    pub spec: TriggerSpec,
    /// Observed state.
    pub status: TriggerStatus,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

/// Answer of `GET /v1/namespaces/{ns}/triggers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerList {
    /// Triggers sorted by name.
    pub items: Vec<Trigger>,
}

/// Checks a JSON payload text.
pub fn validate_payload(field: &str, payload: &str) -> Result<(), FieldError> {
    serde_json::from_str::<serde_json::Value>(payload)
        .map(|_| ())
        .map_err(|e| FieldError::invalid(field, format!("must be valid JSON: {e}")))
}

impl CreateTrigger {
    /// Checks every field and returns the name and spec. Schedule syntax is
    /// checked with [`validate::cron_schedule`].
    pub fn validate(&self) -> Result<(String, TriggerSpec), FieldError> {
        let name = validate::required("name", &self.name)?;
        validate::name("name", name)?;
        let function = validate::required("function", &self.function)?;
        validate::name("function", function)?;
        let trigger_type = match self.trigger_type.as_deref() {
            None => return Err(FieldError::missing("type")),
            Some("http") => TriggerType::Http,
            Some("cron") => TriggerType::Cron,
            Some(other) => {
                return Err(FieldError::invalid(
                    "type",
                    format!("unknown trigger type {other:?}: supported types are http, cron"),
                ));
            }
        };
        let (schedule, payload) = match trigger_type {
            TriggerType::Cron => {
                let s = validate::required("schedule", &self.schedule)?;
                validate::cron_schedule("schedule", s)?;
                if let Some(p) = &self.payload {
                    validate_payload("payload", p)?;
                }
                (Some(s.to_string()), self.payload.clone())
            }
            TriggerType::Http => {
                if self.schedule.is_some() {
                    return Err(FieldError::invalid(
                        "schedule",
                        "only cron triggers have a schedule",
                    ));
                }
                if self.payload.is_some() {
                    return Err(FieldError::invalid(
                        "payload",
                        "only cron triggers have a payload; http triggers pass the request body",
                    ));
                }
                (None, None)
            }
        };
        Ok((
            name.to_string(),
            TriggerSpec {
                function: function.to_string(),
                trigger_type,
                schedule,
                payload,
                enabled: self.enabled.unwrap_or(true),
            },
        ))
    }
}

impl UpdateTrigger {
    /// Applies this partial update to `current`, validating given fields.
    pub fn apply_to(&self, current: &TriggerSpec) -> Result<TriggerSpec, FieldError> {
        let mut next = current.clone();
        if let Some(f) = &self.function {
            validate::name("function", f)?;
            next.function = f.clone();
        }
        let is_cron = current.trigger_type == TriggerType::Cron;
        if let Some(s) = &self.schedule {
            if !is_cron {
                return Err(FieldError::invalid(
                    "schedule",
                    "only cron triggers have a schedule",
                ));
            }
            validate::cron_schedule("schedule", s)?;
            next.schedule = Some(s.clone());
        }
        if let Some(p) = &self.payload {
            if !is_cron {
                return Err(FieldError::invalid(
                    "payload",
                    "only cron triggers have a payload",
                ));
            }
            next.payload = if p.is_empty() {
                None
            } else {
                validate_payload("payload", p)?;
                Some(p.clone())
            };
        }
        if let Some(e) = self.enabled {
            next.enabled = e;
        }
        Ok(next)
    }
}
