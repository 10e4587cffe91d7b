//! Jobs: run code once with an input and keep its return value (like
//! `aws_lambda_invocation`, plus a timeout and failing on errors).
//!
//! Every spec change or code upload bumps `generation`; the operator runs the
//! job once per generation (once code is there) and reports the generation it
//! ran as `status.observed_generation`. A client waits until
//! `observed_generation == generation` and the phase is terminal.

use crate::runtime::Runtime;
use crate::secret::{self, SecretEnv, SecretValues};
use crate::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Largest job result (the JSON-encoded return value) kept, in bytes. A
/// larger result fails the job with a message saying so (never truncated JSON).
pub const JOB_RESULT_MAX_BYTES: usize = 256 * 1024;

/// Largest job input (JSON text), in bytes.
pub const JOB_INPUT_MAX_BYTES: usize = 256 * 1024;

/// Body of `POST /v1/namespaces/{ns}/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateJob {
    /// Job name, a DNS-1123 label. Required.
    pub name: Option<String>,
    /// Runtime. Required.
    pub runtime: Option<String>,
    /// `module.function`. Required.
    pub entrypoint: Option<String>,
    /// Environment variables.
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// Secret environment variables: stored apart, never returned (GET
    /// answers carry the names and a hash).
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secret_env_vars: SecretValues,
    /// The event passed to the handler, as JSON text (default `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Opaque run counter; changing it reruns the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// Memory limit in MiB (default 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<i64>,
    /// Run timeout in seconds (default 30): a run past it is killed and fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
}

/// Body of `PATCH /v1/namespaces/{ns}/jobs/{name}`: absent fields are kept;
/// any change reruns the job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateJob {
    /// New runtime (rebuilds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// New entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// New environment (replaces the map).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_vars: Option<BTreeMap<String, String>>,
    /// New secret environment variables (replaces the map; restart, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env_vars: Option<SecretValues>,
    /// New input JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// New run counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// New memory limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<i64>,
    /// New timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
}

/// The desired state of a job, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobSpec {
    /// Runtime.
    pub runtime: Runtime,
    /// `module.function`.
    pub entrypoint: String,
    /// Environment variables (sorted).
    pub env_vars: BTreeMap<String, String>,
    /// Secret environment variables: names and hash (the values are stored
    /// apart by the backend).
    #[serde(default, skip_serializing_if = "SecretEnv::is_empty")]
    pub secret_env_vars: SecretEnv,
    /// Input JSON text.
    pub input: String,
    /// Run counter.
    pub run_id: i64,
    /// Memory limit in MiB.
    pub memory_mb: u32,
    /// Run timeout in seconds.
    pub timeout_sec: u32,
}

/// Lifecycle phase of a job run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum JobPhase {
    /// Waiting for code.
    Pending,
    /// Unpacking code and installing dependencies.
    Building,
    /// The entrypoint is running.
    Running,
    /// The run returned; `message` holds the result.
    Succeeded,
    /// The build or run failed; `error` says why.
    Failed,
}

impl JobPhase {
    /// True for Succeeded and Failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobPhase::Succeeded | JobPhase::Failed)
    }
}

/// What the operator observed about a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobStatus {
    /// Phase of the run for `observed_generation`.
    pub phase: JobPhase,
    /// The return value, JSON-encoded (Succeeded only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why it failed, with the tail of the output (Failed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// RFC 3339 start of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339 end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// sha256 of the uploaded zip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    /// The client's source hash, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    /// Image reference of the last successful build: the kube backend's
    /// image; for the local backend `local/<ns>/<name>:<first 12 hex of
    /// code_sha256>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<String>,
    /// The generation this status describes.
    #[serde(default)]
    pub observed_generation: u64,
}

/// A job as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Job {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Bumped on every spec change and code upload.
    pub generation: u64,
    /// Desired state.
    pub spec: JobSpec,
    /// Observed state.
    pub status: JobStatus,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

/// Answer of `GET /v1/namespaces/{ns}/jobs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobList {
    /// Jobs sorted by name.
    pub items: Vec<Job>,
}

/// Checks a job input: valid JSON within [`JOB_INPUT_MAX_BYTES`].
pub fn validate_input(field: &str, input: &str) -> Result<(), FieldError> {
    if input.len() > JOB_INPUT_MAX_BYTES {
        return Err(FieldError::invalid(
            field,
            format!(
                "the input is {} bytes, at most {JOB_INPUT_MAX_BYTES} are allowed",
                input.len()
            ),
        ));
    }
    serde_json::from_str::<serde_json::Value>(input)
        .map(|_| ())
        .map_err(|e| FieldError::invalid(field, format!("must be valid JSON: {e}")))
}

impl CreateJob {
    /// Checks every field and returns the name and spec.
    pub fn validate(&self) -> Result<(String, JobSpec), FieldError> {
        let name = validate::required("name", &self.name)?;
        validate::name("name", name)?;
        let runtime = validate::runtime("runtime", validate::required("runtime", &self.runtime)?)?;
        let entrypoint = validate::required("entrypoint", &self.entrypoint)?;
        validate::entrypoint("entrypoint", runtime, entrypoint)?;
        validate::env_vars("env_vars", &self.env_vars)?;
        secret::validate_secrets(&self.secret_env_vars.0, &self.env_vars)?;
        let input = self.input.clone().unwrap_or_else(|| "null".to_string());
        validate_input("input", &input)?;
        let memory_mb = validate::memory_mb_or_default("memory_mb", self.memory_mb)?;
        let timeout_sec = validate::timeout_sec_or_default("timeout_sec", self.timeout_sec)?;
        Ok((
            name.to_string(),
            JobSpec {
                runtime,
                entrypoint: entrypoint.to_string(),
                env_vars: self.env_vars.clone(),
                secret_env_vars: SecretEnv::from_values(&self.secret_env_vars.0),
                input,
                run_id: self.run_id.unwrap_or(0),
                memory_mb,
                timeout_sec,
            },
        ))
    }
}

impl CreateJob {
    /// The update that gives any job this create's spec: every field set,
    /// defaults resolved as [`CreateJob::validate`] resolves them.
    pub fn to_full_update(&self) -> Result<UpdateJob, FieldError> {
        let (_, spec) = self.validate()?;
        Ok(UpdateJob {
            runtime: Some(spec.runtime.to_string()),
            entrypoint: Some(spec.entrypoint),
            env_vars: Some(spec.env_vars),
            secret_env_vars: Some(self.secret_env_vars.clone()),
            input: Some(spec.input),
            run_id: Some(spec.run_id),
            memory_mb: Some(spec.memory_mb.into()),
            timeout_sec: Some(spec.timeout_sec.into()),
        })
    }
}

impl UpdateJob {
    /// Applies this partial update to `current`, validating given fields.
    pub fn apply_to(&self, current: &JobSpec) -> Result<JobSpec, FieldError> {
        let mut next = current.clone();
        if let Some(r) = &self.runtime {
            next.runtime = validate::runtime("runtime", r)?;
        }
        if let Some(e) = &self.entrypoint {
            next.entrypoint = e.clone();
        }
        if self.entrypoint.is_some() || self.runtime.is_some() {
            validate::entrypoint("entrypoint", next.runtime, &next.entrypoint)?;
        }
        if let Some(env) = &self.env_vars {
            validate::env_vars("env_vars", env)?;
            next.env_vars = env.clone();
        }
        next.secret_env_vars = secret::apply_secret_update(
            self.secret_env_vars.as_ref(),
            &current.secret_env_vars,
            &next.env_vars,
        )?;
        if let Some(i) = &self.input {
            validate_input("input", i)?;
            next.input = i.clone();
        }
        if let Some(r) = self.run_id {
            next.run_id = r;
        }
        if let Some(m) = self.memory_mb {
            next.memory_mb = validate::memory_mb("memory_mb", m)?;
        }
        if let Some(t) = self.timeout_sec {
            next.timeout_sec = validate::timeout_sec("timeout_sec", t)?;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare_create() -> CreateJob {
        CreateJob {
            name: Some("left".into()),
            runtime: Some("python3.11".into()),
            entrypoint: Some("main.handler".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_full_update_of_a_create_gives_any_job_its_spec() {
        let (_, other) = CreateJob {
            name: Some("left".into()),
            runtime: Some("nodejs20".into()),
            entrypoint: Some("index.handler".into()),
            env_vars: BTreeMap::from([("ROUND".into(), "3".into())]),
            secret_env_vars: SecretValues(BTreeMap::from([("KEY".into(), "old".into())])),
            input: Some(r#"{"n": 1}"#.into()),
            run_id: Some(3),
            memory_mb: Some(256),
            timeout_sec: Some(7),
        }
        .validate()
        .unwrap();
        let full = CreateJob {
            input: Some("[1, 2]".into()),
            run_id: Some(9),
            secret_env_vars: SecretValues(BTreeMap::from([("TOKEN".into(), "new".into())])),
            ..bare_create()
        };
        for create in [bare_create(), full] {
            let (_, wanted) = create.validate().unwrap();
            let update = create.to_full_update().unwrap();
            assert_eq!(update.apply_to(&other).unwrap(), wanted, "{create:?}");
        }
    }
}
