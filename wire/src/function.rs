//! Request and response bodies for namespaces and functions.

use crate::runtime::Runtime;
use crate::secret::{self, SecretEnv, SecretValues};
use crate::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Answer of `POST /v1/namespaces/{ns}/ensure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NamespaceInfo {
    /// The namespace, `sless-` + 8 hex characters.
    pub namespace: String,
    /// True when this call created it, false when it already existed.
    pub created: bool,
}

/// Body of `POST /v1/namespaces/{ns}/functions`.
///
/// Required fields are `Option` on the wire so that a missing one is answered
/// with a 400 naming it, not a generic parse error. [`CreateFunction::validate`]
/// turns it into a checked [`FunctionSpec`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateFunction {
    /// Function name, a DNS-1123 label. Required.
    pub name: Option<String>,
    /// Runtime, e.g. `python3.11` or `nodejs20`. Required.
    pub runtime: Option<String>,
    /// `module.function`, e.g. `main.handler`. Required.
    pub entrypoint: Option<String>,
    /// Environment variables given to the function.
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// Secret environment variables: stored apart, never returned (GET
    /// answers carry the names and a hash).
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secret_env_vars: SecretValues,
    /// Memory limit in MiB (default 128).
    pub memory_mb: Option<i64>,
    /// Per-invocation timeout in seconds (default 30).
    pub timeout_sec: Option<i64>,
    /// Processes kept running when idle: 0 (default) scales to zero after
    /// `idle_timeout_sec`, 1 keeps one always up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_instances: Option<i64>,
    /// Seconds without a request before a function with `min_instances = 0`
    /// stops its process (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_sec: Option<i64>,
}

/// Body of `PATCH /v1/namespaces/{ns}/functions/{name}`: every field optional;
/// an absent field keeps its current value (a partial update never wipes).
/// `env_vars`, when given, replaces the whole map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateFunction {
    /// New runtime (the code is rebuilt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// New entrypoint (the process restarts, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// New environment (the process restarts, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_vars: Option<BTreeMap<String, String>>,
    /// New secret environment variables (replaces the map; restart, no rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env_vars: Option<SecretValues>,
    /// New memory limit in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<i64>,
    /// New timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
    /// New `min_instances` (applied without a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_instances: Option<i64>,
    /// New `idle_timeout_sec` (applied without a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_sec: Option<i64>,
}

/// The desired state of a function, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionSpec {
    /// The runtime.
    pub runtime: Runtime,
    /// `module.function`.
    pub entrypoint: String,
    /// Environment variables (applied in sorted order).
    pub env_vars: BTreeMap<String, String>,
    /// Secret environment variables: names and hash (the values are stored
    /// apart by the backend).
    #[serde(default, skip_serializing_if = "SecretEnv::is_empty")]
    pub secret_env_vars: SecretEnv,
    /// Memory limit in MiB.
    pub memory_mb: u32,
    /// Per-invocation timeout in seconds.
    pub timeout_sec: u32,
    /// Processes kept when idle: 0 scales to zero, 1 keeps one up.
    #[serde(default)]
    pub min_instances: u32,
    /// Seconds without a request before scaling to zero.
    #[serde(default = "default_idle_timeout_sec")]
    pub idle_timeout_sec: u32,
}

fn default_idle_timeout_sec() -> u32 {
    crate::limits::IDLE_TIMEOUT_SEC_DEFAULT
}

impl FunctionSpec {
    /// True when `other` differs from this spec only in how it scales
    /// (`min_instances`, `idle_timeout_sec`): the process keeps running.
    pub fn same_process_as(&self, other: &FunctionSpec) -> bool {
        FunctionSpec {
            min_instances: other.min_instances,
            idle_timeout_sec: other.idle_timeout_sec,
            ..self.clone()
        } == *other
    }
}

/// Lifecycle phase of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Phase {
    /// Created, waiting for code.
    Pending,
    /// Unpacking code, installing dependencies, starting the process.
    Building,
    /// Serving invocations.
    Ready,
    /// The build or start failed; `message` and the build log say why.
    /// A new code upload or spec update tries again.
    Failed,
    /// Being deleted.
    Deleting,
}

impl Phase {
    /// True for phases a waiter can stop on: Ready and Failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Ready | Phase::Failed)
    }

    /// The phase name as shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Building => "Building",
            Phase::Ready => "Ready",
            Phase::Failed => "Failed",
            Phase::Deleting => "Deleting",
        }
    }
}

/// What the operator observed about a function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionStatus {
    /// Lifecycle phase.
    pub phase: Phase,
    /// Why the function is in this phase, e.g. the build error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// sha256 (hex) of the uploaded zip: the content-addressed code key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    /// The client's own hash of the source content, stored as given with the
    /// upload, so a client can detect drift without re-zipping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    /// Image reference where the backend builds images (kube); for the local
    /// backend `local/<ns>/<name>:<first 12 hex of code_sha256>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<String>,
    /// RFC 3339 time the last successful build finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_built_at: Option<String>,
    /// Path of the authenticated invoke endpoint, relative to the operator.
    pub invoke_path: String,
    /// How often the function's process was restarted after a crash.
    #[serde(default)]
    pub restarts: u32,
    /// Processes running now: 0 when scaled to zero (the next request
    /// starts one), else 1.
    #[serde(default)]
    pub instances: u32,
}

/// A function as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Function {
    /// Namespace it lives in.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Desired state.
    pub spec: FunctionSpec,
    /// Observed state.
    pub status: FunctionStatus,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last spec or code change.
    pub updated_at: String,
}

/// Answer of `GET /v1/namespaces/{ns}/functions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionList {
    /// Functions sorted by name.
    pub items: Vec<Function>,
}

/// Query of `PUT .../code`: the body is the zip itself (`application/zip`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
pub struct CodeUpload {
    /// sha256 (hex) of the zip body; the operator verifies it (400 if it differs).
    pub sha256: String,
    /// Optional client-side hash of the source content, stored as given.
    #[serde(default)]
    pub source_hash: Option<String>,
}

/// Which log `GET .../logs` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    /// Output of the last build (unpack, dependency install, start).
    #[default]
    Build,
    /// The function process's stdout and stderr.
    Run,
}

/// Query of `GET .../logs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
pub struct LogQuery {
    /// `build` (default) or `run`.
    #[serde(default)]
    pub kind: LogKind,
    /// Only the last N lines.
    #[serde(default)]
    pub tail: Option<usize>,
}

impl CreateFunction {
    /// Checks every field and returns the function name and its spec, or the
    /// first field that breaks a rule.
    pub fn validate(&self) -> Result<(String, FunctionSpec), FieldError> {
        let name = validate::required("name", &self.name)?;
        validate::name("name", name)?;
        let runtime = validate::runtime("runtime", validate::required("runtime", &self.runtime)?)?;
        let entrypoint = validate::required("entrypoint", &self.entrypoint)?;
        validate::entrypoint("entrypoint", runtime, entrypoint)?;
        validate::env_vars("env_vars", &self.env_vars)?;
        secret::validate_secrets(&self.secret_env_vars.0, &self.env_vars)?;
        let memory_mb = validate::memory_mb_or_default("memory_mb", self.memory_mb)?;
        let timeout_sec = validate::timeout_sec_or_default("timeout_sec", self.timeout_sec)?;
        let min_instances =
            validate::min_instances_or_default("min_instances", self.min_instances)?;
        let idle_timeout_sec =
            validate::idle_timeout_sec_or_default("idle_timeout_sec", self.idle_timeout_sec)?;
        Ok((
            name.to_string(),
            FunctionSpec {
                runtime,
                entrypoint: entrypoint.to_string(),
                env_vars: self.env_vars.clone(),
                secret_env_vars: SecretEnv::from_values(&self.secret_env_vars.0),
                memory_mb,
                timeout_sec,
                min_instances,
                idle_timeout_sec,
            },
        ))
    }
}

impl CreateFunction {
    /// The update that gives any function this create's spec: every field
    /// set, defaults resolved as [`CreateFunction::validate`] resolves them
    /// (what the provider sends to adopt a function an interrupted create left).
    pub fn to_full_update(&self) -> Result<UpdateFunction, FieldError> {
        let (_, spec) = self.validate()?;
        Ok(UpdateFunction {
            runtime: Some(spec.runtime.to_string()),
            entrypoint: Some(spec.entrypoint),
            env_vars: Some(spec.env_vars),
            secret_env_vars: Some(self.secret_env_vars.clone()),
            memory_mb: Some(spec.memory_mb.into()),
            timeout_sec: Some(spec.timeout_sec.into()),
            min_instances: Some(spec.min_instances.into()),
            idle_timeout_sec: Some(spec.idle_timeout_sec.into()),
        })
    }
}

impl UpdateFunction {
    /// Applies this partial update to `current`, validating every given field.
    /// Fields that are absent keep their current value.
    pub fn apply_to(&self, current: &FunctionSpec) -> Result<FunctionSpec, FieldError> {
        let mut next = current.clone();
        if let Some(r) = &self.runtime {
            next.runtime = validate::runtime("runtime", r)?;
        }
        if let Some(e) = &self.entrypoint {
            next.entrypoint = e.clone();
        }
        // Re-check the entrypoint whenever it or the runtime changed.
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
        if let Some(m) = self.memory_mb {
            next.memory_mb = validate::memory_mb("memory_mb", m)?;
        }
        if let Some(t) = self.timeout_sec {
            next.timeout_sec = validate::timeout_sec("timeout_sec", t)?;
        }
        if let Some(m) = self.min_instances {
            next.min_instances = validate::min_instances("min_instances", m)?;
        }
        if let Some(t) = self.idle_timeout_sec {
            next.idle_timeout_sec = validate::idle_timeout_sec("idle_timeout_sec", t)?;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{MEMORY_MB_DEFAULT, TIMEOUT_SEC_DEFAULT};

    fn create() -> CreateFunction {
        CreateFunction {
            name: Some("hello".into()),
            runtime: Some("python3.11".into()),
            entrypoint: Some("main.handler".into()),
            ..Default::default()
        }
    }

    #[test]
    fn create_fills_defaults() {
        let (name, spec) = create().validate().unwrap();
        assert_eq!(name, "hello");
        assert_eq!(spec.memory_mb, MEMORY_MB_DEFAULT);
        assert_eq!(spec.timeout_sec, TIMEOUT_SEC_DEFAULT);
    }

    #[test]
    fn create_names_the_missing_field() {
        let mut c = create();
        c.entrypoint = None;
        let err = c.validate().unwrap_err();
        assert_eq!(err.field, "entrypoint");
        assert!(err.missing);
    }

    #[test]
    fn create_names_the_bad_runtime() {
        let mut c = create();
        c.runtime = Some("ruby3.0".into());
        assert_eq!(c.validate().unwrap_err().field, "runtime");
    }

    #[test]
    fn partial_update_keeps_other_fields() {
        let (_, mut spec) = create().validate().unwrap();
        spec.env_vars.insert("A".into(), "1".into());
        spec.memory_mb = 256;
        let next = UpdateFunction {
            timeout_sec: Some(60),
            ..Default::default()
        }
        .apply_to(&spec)
        .unwrap();
        assert_eq!(next.timeout_sec, 60);
        assert_eq!(next.memory_mb, 256);
        assert_eq!(next.env_vars.get("A").map(String::as_str), Some("1"));
    }

    #[test]
    fn update_rechecks_entrypoint_on_runtime_change() {
        let (_, spec) = create().validate().unwrap();
        // main.handler is valid for both languages; a Python-only dotted path with
        // a '-' is not valid for either.
        let err = UpdateFunction {
            entrypoint: Some("bad-mod.handler".into()),
            ..Default::default()
        }
        .apply_to(&spec)
        .unwrap_err();
        assert_eq!(err.field, "entrypoint");
    }

    #[test]
    fn scaling_fields_default_validate_and_change_without_a_new_process() {
        let (_, spec) = create().validate().unwrap();
        assert_eq!((spec.min_instances, spec.idle_timeout_sec), (0, 300));
        for (field, c) in [
            (
                "min_instances",
                CreateFunction {
                    min_instances: Some(2),
                    ..create()
                },
            ),
            (
                "min_instances",
                CreateFunction {
                    min_instances: Some(-1),
                    ..create()
                },
            ),
            (
                "idle_timeout_sec",
                CreateFunction {
                    idle_timeout_sec: Some(0),
                    ..create()
                },
            ),
            (
                "idle_timeout_sec",
                CreateFunction {
                    idle_timeout_sec: Some(86_401),
                    ..create()
                },
            ),
        ] {
            assert_eq!(c.validate().unwrap_err().field, field);
        }
        let next = UpdateFunction {
            min_instances: Some(1),
            idle_timeout_sec: Some(5),
            ..Default::default()
        }
        .apply_to(&spec)
        .unwrap();
        assert_eq!((next.min_instances, next.idle_timeout_sec), (1, 5));
        assert!(spec.same_process_as(&next));
        let mut other = next.clone();
        other.memory_mb = 512;
        assert!(!spec.same_process_as(&other));
        // A spec stored before these fields existed reads with the defaults.
        let old = r#"{"runtime":"python3.11","entrypoint":"main.handler","env_vars":{},"memory_mb":128,"timeout_sec":30}"#;
        let old: FunctionSpec = serde_json::from_str(old).unwrap();
        assert_eq!((old.min_instances, old.idle_timeout_sec), (0, 300));
    }

    /// A create whose optional fields are all left to their defaults.
    fn bare_create() -> CreateFunction {
        CreateFunction {
            name: Some("left".into()),
            runtime: Some("python3.11".into()),
            entrypoint: Some("main.handler".into()),
            ..Default::default()
        }
    }

    /// A spec that differs from `bare_create`'s in every field.
    fn other_spec() -> FunctionSpec {
        CreateFunction {
            name: Some("left".into()),
            runtime: Some("nodejs20".into()),
            entrypoint: Some("index.handler".into()),
            env_vars: BTreeMap::from([("GREETING".into(), "hacked".into())]),
            secret_env_vars: SecretValues(BTreeMap::from([("KEY".into(), "old".into())])),
            memory_mb: Some(256),
            timeout_sec: Some(7),
            min_instances: Some(1),
            idle_timeout_sec: Some(33),
        }
        .validate()
        .unwrap()
        .1
    }

    #[test]
    fn the_full_update_of_a_create_gives_any_function_its_spec() {
        let full = CreateFunction {
            env_vars: BTreeMap::from([("GREETING".into(), "hello".into())]),
            secret_env_vars: SecretValues(BTreeMap::from([("TOKEN".into(), "new".into())])),
            memory_mb: Some(512),
            ..bare_create()
        };
        for create in [bare_create(), full] {
            let (_, wanted) = create.validate().unwrap();
            let update = create.to_full_update().unwrap();
            assert_eq!(
                update.apply_to(&other_spec()).unwrap(),
                wanted,
                "{create:?}"
            );
        }
        let bad = CreateFunction {
            memory_mb: Some(1),
            ..bare_create()
        };
        assert_eq!(bad.to_full_update().unwrap_err().field, "memory_mb");
    }
}
