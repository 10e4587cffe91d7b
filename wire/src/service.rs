//! Services: long-running processes the user writes. The process listens on
//! `$PORT`; the operator keeps it running (restarts it when it dies) and
//! serves it on a public URL.

use crate::function::Phase;
use crate::runtime::Runtime;
use crate::secret::{self, SecretEnv, SecretValues};
use crate::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Body of `POST /v1/namespaces/{ns}/services`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateService {
    /// Service name, a DNS-1123 label. Required.
    pub name: Option<String>,
    /// Runtime. Required.
    pub runtime: Option<String>,
    /// The script to run, relative to the code root (e.g. `app.py`,
    /// `server.js`). Required unless `command` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// A full command line instead of `entrypoint`, e.g. `["python3", "-m", "app"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Environment variables (`PORT` is set by the platform).
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// Secret environment variables: stored apart, never returned (GET
    /// answers carry the names and a hash).
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secret_env_vars: SecretValues,
    /// Memory limit in MiB (default 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<i64>,
    /// Per-request timeout in seconds at the proxy (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
    /// Readiness path polled until it answers below 500 (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
}

/// Body of `PATCH /v1/namespaces/{ns}/services/{name}`: absent fields are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateService {
    /// New runtime (rebuilds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// New script (restart, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// New command (restart, no rebuild). An empty list clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// New environment (restart, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_vars: Option<BTreeMap<String, String>>,
    /// New secret environment variables (replaces the map; restart, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env_vars: Option<SecretValues>,
    /// New memory limit (restart, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<i64>,
    /// New timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
    /// New readiness path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
}

/// The desired state of a service, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceSpec {
    /// Runtime.
    pub runtime: Runtime,
    /// Script relative to the code root (when no command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// Full command line (when no entrypoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Environment variables (sorted).
    pub env_vars: BTreeMap<String, String>,
    /// Secret environment variables: names and hash (the values are stored
    /// apart by the backend).
    #[serde(default, skip_serializing_if = "SecretEnv::is_empty")]
    pub secret_env_vars: SecretEnv,
    /// Memory limit in MiB.
    pub memory_mb: u32,
    /// Per-request timeout in seconds.
    pub timeout_sec: u32,
    /// Readiness path.
    pub health_path: String,
}

/// What the operator observed about a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceStatus {
    /// Phase (same phases as functions).
    pub phase: Phase,
    /// Why it is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// sha256 of the uploaded zip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    /// The client's source hash, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    /// Public URL, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// RFC 3339 end of the last successful build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_built_at: Option<String>,
    /// Restarts after the process died.
    #[serde(default)]
    pub restarts: u32,
}

/// A service as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Desired state.
    pub spec: ServiceSpec,
    /// Observed state.
    pub status: ServiceStatus,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

/// Answer of `GET /v1/namespaces/{ns}/services`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceList {
    /// Services sorted by name.
    pub items: Vec<Service>,
}

/// A script path relative to the code root: no `..`, not absolute.
pub fn validate_script(field: &str, value: &str) -> Result<(), FieldError> {
    let ok = !value.is_empty()
        && value.len() <= crate::limits::ENTRYPOINT_MAX_LEN
        && !value.starts_with('/')
        && value
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
        && !value.contains('\0')
        && !value.contains('\\');
    if ok {
        Ok(())
    } else {
        Err(FieldError::invalid(
            field,
            format!(
                "{value:?} must be a file path relative to the code root, e.g. app.py or src/server.js"
            ),
        ))
    }
}

/// A readiness path: starts with `/`, no spaces.
pub fn validate_health_path(field: &str, value: &str) -> Result<(), FieldError> {
    if value.starts_with('/') && !value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Ok(())
    } else {
        Err(FieldError::invalid(
            field,
            format!("{value:?} must be an absolute URL path such as / or /healthz"),
        ))
    }
}

fn validate_command(field: &str, command: &[String]) -> Result<(), FieldError> {
    if command.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(FieldError::invalid(
            field,
            "the command needs a program as its first element",
        ));
    }
    if command.iter().any(|a| a.contains('\0')) {
        return Err(FieldError::invalid(
            field,
            "arguments cannot contain NUL bytes",
        ));
    }
    Ok(())
}

fn check_start(entrypoint: &Option<String>, command: &[String]) -> Result<(), FieldError> {
    match (entrypoint, command.is_empty()) {
        (Some(e), true) => validate_script("entrypoint", e),
        (None, false) => validate_command("command", command),
        (Some(_), false) => Err(FieldError::invalid(
            "command",
            "give either entrypoint or command, not both",
        )),
        (None, true) => Err(FieldError::missing("entrypoint")),
    }
}

impl CreateService {
    /// Checks every field and returns the name and spec.
    pub fn validate(&self) -> Result<(String, ServiceSpec), FieldError> {
        let name = validate::required("name", &self.name)?;
        validate::name("name", name)?;
        let runtime = validate::runtime("runtime", validate::required("runtime", &self.runtime)?)?;
        let command = self.command.clone().unwrap_or_default();
        check_start(&self.entrypoint, &command)?;
        validate::env_vars("env_vars", &self.env_vars)?;
        secret::validate_secrets(&self.secret_env_vars.0, &self.env_vars)?;
        let memory_mb = validate::memory_mb_or_default("memory_mb", self.memory_mb)?;
        let timeout_sec = validate::timeout_sec_or_default("timeout_sec", self.timeout_sec)?;
        let health_path = self.health_path.clone().unwrap_or_else(|| "/".to_string());
        validate_health_path("health_path", &health_path)?;
        Ok((
            name.to_string(),
            ServiceSpec {
                runtime,
                entrypoint: self.entrypoint.clone(),
                command,
                env_vars: self.env_vars.clone(),
                secret_env_vars: SecretEnv::from_values(&self.secret_env_vars.0),
                memory_mb,
                timeout_sec,
                health_path,
            },
        ))
    }
}

impl CreateService {
    /// The update that gives any service this create's spec: every field
    /// set (an empty `command` clears one), defaults resolved as
    /// [`CreateService::validate`] resolves them.
    pub fn to_full_update(&self) -> Result<UpdateService, FieldError> {
        let (_, spec) = self.validate()?;
        Ok(UpdateService {
            runtime: Some(spec.runtime.to_string()),
            entrypoint: spec.entrypoint,
            command: Some(spec.command),
            env_vars: Some(spec.env_vars),
            secret_env_vars: Some(self.secret_env_vars.clone()),
            memory_mb: Some(spec.memory_mb.into()),
            timeout_sec: Some(spec.timeout_sec.into()),
            health_path: Some(spec.health_path),
        })
    }
}

impl UpdateService {
    /// Applies this partial update to `current`, validating given fields.
    pub fn apply_to(&self, current: &ServiceSpec) -> Result<ServiceSpec, FieldError> {
        let mut next = current.clone();
        if let Some(r) = &self.runtime {
            next.runtime = validate::runtime("runtime", r)?;
        }
        if let Some(e) = &self.entrypoint {
            next.entrypoint = Some(e.clone());
            if self.command.is_none() {
                next.command.clear();
            }
        }
        if let Some(c) = &self.command {
            next.command = c.clone();
            if !c.is_empty() && self.entrypoint.is_none() {
                next.entrypoint = None;
            }
        }
        check_start(&next.entrypoint, &next.command)?;
        if let Some(env) = &self.env_vars {
            validate::env_vars("env_vars", env)?;
            next.env_vars = env.clone();
        }
        next.secret_env_vars = secret::apply_secret_update(
            self.secret_env_vars.as_ref(),
            &current.secret_env_vars,
            &next.env_vars,
        )?;
        if let Some(m) = self.memory_mb {
            next.memory_mb = validate::memory_mb("memory_mb", m)?;
        }
        if let Some(t) = self.timeout_sec {
            next.timeout_sec = validate::timeout_sec("timeout_sec", t)?;
        }
        if let Some(h) = &self.health_path {
            validate_health_path("health_path", h)?;
            next.health_path = h.clone();
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_entrypoint() -> CreateService {
        CreateService {
            name: Some("left".into()),
            runtime: Some("python3.11".into()),
            entrypoint: Some("app.py".into()),
            ..Default::default()
        }
    }

    fn with_command() -> CreateService {
        CreateService {
            entrypoint: None,
            command: Some(vec!["python3".into(), "-m".into(), "http.server".into()]),
            env_vars: BTreeMap::from([("PORT_HINT".into(), "8080".into())]),
            secret_env_vars: SecretValues(BTreeMap::from([("KEY".into(), "old".into())])),
            memory_mb: Some(256),
            timeout_sec: Some(7),
            health_path: Some("/healthz".into()),
            ..with_entrypoint()
        }
    }

    #[test]
    fn the_full_update_of_a_create_gives_any_service_its_spec() {
        // From a command to an entrypoint and back: each way the update
        // clears what the other start had.
        for (create, left) in [
            (with_entrypoint(), with_command()),
            (with_command(), with_entrypoint()),
        ] {
            let (_, wanted) = create.validate().unwrap();
            let (_, other) = left.validate().unwrap();
            let update = create.to_full_update().unwrap();
            assert_eq!(update.apply_to(&other).unwrap(), wanted, "{create:?}");
        }
    }
}
