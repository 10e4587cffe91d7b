//! The custom resources of group `sless.kube5s.ru`, version `v1alpha1`:
//! [`Function`], [`Trigger`], [`FunctionJob`] and [`SlessService`] (kind
//! `Service`). Their specs mirror the wire spec types (see the `From`
//! conversions); their statuses carry a phase, a message and conditions.
//! `sless-operator crds` prints [`all_crds_yaml`]; `deploy/crds.yaml` is that
//! output, checked by a test.

// `printcolumn(type_ = "string", ...)` repeated across columns is not a
// duplicated attribute, but clippy sees it as one.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sless_wire::Runtime;
use std::collections::BTreeMap;

/// The API group of every sless custom resource.
pub const GROUP: &str = "sless.kube5s.ru";
/// The version of every sless custom resource.
pub const VERSION: &str = "v1alpha1";

/// Where a function's code lives in the object store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeRef {
    /// The content-addressed object key of the build context
    /// (`code/<ns>/<zip sha256>.<runtime>.tar.gz`); the image tag is derived
    /// from it.
    pub key: String,
    /// sha256 (hex) of the uploaded zip.
    pub sha256: String,
    /// The client's own source hash, stored as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
}

/// Desired state of a function (mirrors `sless_wire::function::FunctionSpec`).
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "Function",
    namespaced,
    status = "FunctionStatus",
    shortname = "slfn",
    category = "sless",
    doc = "A sless function: code built into an image and served by a Deployment.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url"),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".status.imageRef",
        priority = "1"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FunctionSpec {
    /// Runtime: `python3.11` or `nodejs20`.
    #[schemars(schema_with = "runtime_schema")]
    pub runtime: String,
    /// `module.function`, given to the runtime as `SLESS_ENTRYPOINT`.
    pub entrypoint: String,
    /// Environment variables (applied in sorted order).
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// Names and hash of the secret environment variables; the values are
    /// in the Secret `<workload>-env` of the deploy namespace.
    #[serde(default, skip_serializing_if = "SecretEnvRef::is_empty")]
    pub secret_env_vars: SecretEnvRef,
    /// Memory limit in MiB.
    #[schemars(range(min = 64, max = 4096))]
    pub memory_mb: u32,
    /// Per-invocation timeout in seconds.
    #[schemars(range(min = 1, max = 900))]
    pub timeout_sec: u32,
    /// Pods kept when idle: 0 or 1. At 0 the Deployment is scaled to zero
    /// after `idle_timeout_sec` without a request and back to one by the
    /// next request (see docs/kubernetes.md, "Scale to zero").
    #[serde(default)]
    #[schemars(range(min = 0, max = 1))]
    pub min_instances: u32,
    /// Seconds without a request before scaling to zero.
    #[serde(default = "default_idle_timeout_sec")]
    #[schemars(range(min = 1, max = 86400))]
    pub idle_timeout_sec: u32,
    /// The uploaded code; absent until the first upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeRef>,
}

/// The secret environment variables of a spec: names and hash only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretEnvRef {
    /// Variable names, sorted.
    #[serde(default)]
    pub names: Vec<String>,
    /// `sless_wire::secret_hash` of the names and values.
    #[serde(default)]
    pub hash: String,
}

impl SecretEnvRef {
    /// True when there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The wire form (without values).
    pub fn to_wire(&self) -> sless_wire::SecretEnv {
        sless_wire::SecretEnv {
            names: self.names.clone(),
            hash: self.hash.clone(),
            values: None,
        }
    }
}

impl From<&sless_wire::SecretEnv> for SecretEnvRef {
    fn from(s: &sless_wire::SecretEnv) -> Self {
        SecretEnvRef {
            names: s.names.clone(),
            hash: s.hash.clone(),
        }
    }
}

/// State of the build of one code key, kept in status so that the
/// "build once per code key" guard survives operator restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildStatus {
    /// Image tag (first 12 hex of sha256 of the code key) this build is for.
    pub tag: String,
    /// The kaniko Job's name.
    pub job: String,
    /// `Running`, `Succeeded` or `Failed`.
    pub state: BuildState,
}

/// Where a build is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BuildState {
    /// The kaniko Job was created and has not finished.
    Running,
    /// The image was pushed.
    Succeeded,
    /// The build failed; only new code starts another one.
    Failed,
}

/// Observed state of a function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionStatus {
    /// `Pending`, `Building`, `Ready`, `Failed` or `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why it is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last build started, by code key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildStatus>,
    /// The image the Deployment runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<String>,
    /// sha256 of the zip that image was built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    /// RFC 3339 time the last successful build was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_built_at: Option<String>,
    /// In-cluster URL of the function's Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Container restarts summed over the function's current pods (read
    /// when the function is reconciled).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub restarts: u32,
    /// Pods serving: 0 or 1, from the Deployment's available replicas (0
    /// as soon as the function is scaled to zero). Absent (0) in objects
    /// written before scale to zero.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub instances: u32,
    /// `Built` and `Ready` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Desired state of a trigger (mirrors `sless_wire::TriggerSpec`).
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "Trigger",
    namespaced,
    status = "TriggerStatus",
    shortname = "sltr",
    category = "sless",
    doc = "Calls a sless function: a public URL (http) or a schedule (cron).",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Function", type_ = "string", json_path = ".spec.function"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TriggerSpec {
    /// Target function in the same namespace.
    pub function: String,
    /// `http` or `cron`.
    #[serde(rename = "type")]
    #[schemars(schema_with = "trigger_type_schema")]
    pub trigger_type: String,
    /// Cron schedule (cron only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// JSON text sent as the body of cron calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Whether the trigger serves / fires.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Observed state of a trigger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerStatus {
    /// `Active`, `Waiting` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why it is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The public URL (http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// RFC 3339 time (UTC) of the next scheduled run (cron, while Active).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<String>,
    /// The newest finished cron run, from its Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<TriggerRunStatus>,
    /// Cron runs (Jobs) started so far; each Job is counted once.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub runs: u64,
    /// The newest Job counted in `runs`: Jobs created after it are new runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<CountedRun>,
    /// `Ready` condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One finished cron run, as its Job reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerRunStatus {
    /// The Job's name.
    pub job: String,
    /// RFC 3339 start of the Job.
    pub started_at: String,
    /// RFC 3339 end of the Job.
    pub completed_at: String,
    /// True when the call succeeded (curl got a 2xx/3xx answer).
    pub ok: bool,
    /// Why the run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The newest cron Job counted in `runs`, by creation time then name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountedRun {
    /// The Job's name.
    pub job: String,
    /// RFC 3339 creation time of the Job.
    pub created_at: String,
}

/// Desired state of a function job (mirrors `sless_wire::JobSpec`).
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "FunctionJob",
    namespaced,
    status = "FunctionJobStatus",
    shortname = "sljob",
    category = "sless",
    doc = "Runs function code once with an input and records its return value.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Run", type_ = "integer", json_path = ".spec.runId"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FunctionJobSpec {
    /// Runtime: `python3.11` or `nodejs20`.
    #[schemars(schema_with = "runtime_schema")]
    pub runtime: String,
    /// `module.function`.
    pub entrypoint: String,
    /// Environment variables.
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// Names and hash of the secret environment variables; the values are
    /// in the Secret `<workload>-env` of the deploy namespace.
    #[serde(default, skip_serializing_if = "SecretEnvRef::is_empty")]
    pub secret_env_vars: SecretEnvRef,
    /// The event, as JSON text.
    pub input: String,
    /// Run counter; changing it reruns the job.
    pub run_id: i64,
    /// Memory limit in MiB.
    #[schemars(range(min = 64, max = 4096))]
    pub memory_mb: u32,
    /// Run timeout in seconds.
    #[schemars(range(min = 1, max = 900))]
    pub timeout_sec: u32,
    /// The uploaded code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeRef>,
}

/// Observed state of a function job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionJobStatus {
    /// `Pending`, `Building`, `Running`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The return value, JSON-encoded (Succeeded), truncated to a safe size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The generation this status is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The last build started, by code key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildStatus>,
    /// Name of the k8s Job running the current generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The image of the last successful build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<String>,
    /// RFC 3339 start of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339 end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// `Built` and `Complete` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Desired state of a long-running service (mirrors `sless_wire::ServiceSpec`).
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sless.kube5s.ru",
    version = "v1alpha1",
    kind = "Service",
    root = "SlessService",
    namespaced,
    status = "SlessServiceStatus",
    shortname = "slsvc",
    category = "sless",
    doc = "A long-running sless process, updated in place and recreated when deleted by hand.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SlessServiceSpec {
    /// Runtime: `python3.11` or `nodejs20`.
    #[schemars(schema_with = "runtime_schema")]
    pub runtime: String,
    /// The script to run, relative to the code root (when no `command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// A full command line instead of `entrypoint`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Environment variables (sorted; `PORT` is set by the platform).
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// Names and hash of the secret environment variables; the values are
    /// in the Secret `<workload>-env` of the deploy namespace.
    #[serde(default, skip_serializing_if = "SecretEnvRef::is_empty")]
    pub secret_env_vars: SecretEnvRef,
    /// Memory limit in MiB.
    #[schemars(range(min = 64, max = 4096))]
    pub memory_mb: u32,
    /// Per-request timeout in seconds at the proxy.
    #[schemars(range(min = 1, max = 900))]
    pub timeout_sec: u32,
    /// Readiness path.
    #[serde(default = "root_path")]
    pub health_path: String,
    /// The uploaded code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeRef>,
}

fn root_path() -> String {
    "/".to_string()
}

impl From<&sless_wire::ServiceSpec> for SlessServiceSpec {
    fn from(s: &sless_wire::ServiceSpec) -> Self {
        SlessServiceSpec {
            runtime: s.runtime.as_str().to_string(),
            entrypoint: s.entrypoint.clone(),
            command: s.command.clone(),
            env_vars: s.env_vars.clone(),
            secret_env_vars: SecretEnvRef::from(&s.secret_env_vars),
            memory_mb: s.memory_mb,
            timeout_sec: s.timeout_sec,
            health_path: s.health_path.clone(),
            code: None,
        }
    }
}

impl SlessServiceSpec {
    /// The wire spec, or the unknown runtime name.
    pub fn to_wire(&self) -> Result<sless_wire::ServiceSpec, String> {
        Ok(sless_wire::ServiceSpec {
            runtime: self.runtime.parse().map_err(|_| self.runtime.clone())?,
            entrypoint: self.entrypoint.clone(),
            command: self.command.clone(),
            env_vars: self.env_vars.clone(),
            secret_env_vars: self.secret_env_vars.to_wire(),
            memory_mb: self.memory_mb,
            timeout_sec: self.timeout_sec,
            health_path: self.health_path.clone(),
        })
    }
}

/// Observed state of a service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlessServiceStatus {
    /// `Pending`, `Building`, `Ready` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why it is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last build started, by code key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildStatus>,
    /// In-cluster URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Container restarts summed over the service's current pods (read
    /// when the service is reconciled).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub restarts: u32,
    /// `Built` and `Ready` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn string_enum(values: &[&str]) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": values })
}

fn runtime_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = Runtime::ALL.iter().map(|r| r.as_str()).collect();
    string_enum(&names)
}

fn trigger_type_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&["http", "cron"])
}

/// Every CRD of the operator, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        Function::crd(),
        Trigger::crd(),
        FunctionJob::crd(),
        SlessService::crd(),
    ]
}

/// The CRDs as one multi-document YAML text (what `sless-operator crds`
/// prints and `deploy/crds.yaml` holds).
pub fn all_crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::from(
        "# Generated by `sless-operator crds` from operator/src/kube/crd.rs; do not edit.\n",
    );
    for crd in all_crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

fn default_idle_timeout_sec() -> u32 {
    sless_wire::limits::IDLE_TIMEOUT_SEC_DEFAULT
}

impl From<&sless_wire::function::FunctionSpec> for FunctionSpec {
    fn from(s: &sless_wire::function::FunctionSpec) -> Self {
        FunctionSpec {
            runtime: s.runtime.as_str().to_string(),
            entrypoint: s.entrypoint.clone(),
            env_vars: s.env_vars.clone(),
            secret_env_vars: SecretEnvRef::from(&s.secret_env_vars),
            memory_mb: s.memory_mb,
            timeout_sec: s.timeout_sec,
            min_instances: s.min_instances,
            idle_timeout_sec: s.idle_timeout_sec,
            code: None,
        }
    }
}

impl FunctionSpec {
    /// The wire spec, or the runtime name that is not known (an object
    /// written by hand with a bad runtime).
    pub fn to_wire(&self) -> Result<sless_wire::function::FunctionSpec, String> {
        Ok(sless_wire::function::FunctionSpec {
            runtime: self.runtime.parse().map_err(|_| self.runtime.clone())?,
            entrypoint: self.entrypoint.clone(),
            env_vars: self.env_vars.clone(),
            secret_env_vars: self.secret_env_vars.to_wire(),
            memory_mb: self.memory_mb,
            timeout_sec: self.timeout_sec,
            min_instances: self.min_instances,
            idle_timeout_sec: self.idle_timeout_sec,
        })
    }

    /// The parsed runtime, when known.
    pub fn runtime(&self) -> Option<Runtime> {
        self.runtime.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_have_group_version_status_and_columns() {
        for crd in all_crds() {
            assert_eq!(crd.spec.group, GROUP);
            let v = &crd.spec.versions[0];
            assert_eq!(v.name, VERSION);
            assert!(
                v.subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some()
            );
            let cols: Vec<&str> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect();
            assert!(cols.contains(&"Phase") && cols.contains(&"Age"), "{cols:?}");
            assert!(
                crd.spec
                    .names
                    .short_names
                    .as_ref()
                    .is_some_and(|s| !s.is_empty())
            );
        }
    }

    #[test]
    fn service_kind_is_service_but_rust_root_differs() {
        let crd = SlessService::crd();
        assert_eq!(crd.spec.names.kind, "Service");
        assert_eq!(crd.spec.names.plural, "services");
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("services.sless.kube5s.ru")
        );
    }

    #[test]
    fn runtime_schema_lists_the_runtimes() {
        let yaml = all_crds_yaml().unwrap();
        assert!(yaml.contains("python3.11") && yaml.contains("nodejs20"));
    }

    #[test]
    fn spec_round_trips_through_wire() {
        let wire = sless_wire::function::FunctionSpec {
            runtime: Runtime::Nodejs20,
            entrypoint: "index.handler".into(),
            env_vars: [("B".to_string(), "2".to_string())].into(),
            secret_env_vars: Default::default(),
            memory_mb: 256,
            timeout_sec: 10,
            min_instances: 1,
            idle_timeout_sec: 60,
        };
        let crd = FunctionSpec::from(&wire);
        assert_eq!(crd.to_wire().unwrap(), wire);
        let json = serde_json::to_value(&crd).unwrap();
        assert_eq!(json["memoryMb"], 256);
        assert_eq!(json["envVars"]["B"], "2");
    }
}
