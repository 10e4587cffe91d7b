//! The engine behind the REST API. The local backend runs functions as
//! processes on this machine; the kube backend (a later issue) reconciles
//! custom resources. The API layer validates input, authenticates and
//! authorises; a backend only stores, builds and runs.

use crate::Result;
use bytes::Bytes;
use sless_wire::function::{FunctionSpec, LogKind, NamespaceInfo};
use sless_wire::trigger::{Trigger, TriggerSpec, UpdateTrigger};
use sless_wire::{Function, UpdateFunction};
use sless_wire::{Job, JobSpec, Service, ServiceSpec, UpdateJob, UpdateService};
use std::sync::Arc;
use std::time::Duration;

/// Where the invoke proxy sends a request for a function.
#[derive(Debug, Clone)]
pub struct InvokeTarget {
    /// Base URL of the function's HTTP server, e.g. `http://127.0.0.1:40123`.
    pub base_url: String,
    /// The client to reach it with when the shared one cannot (a process
    /// behind a unix socket: the client is bound to that socket).
    pub client: Option<crate::api::upstream::Upstream>,
    /// The function's `timeout_sec`: the proxy answers 504 past it.
    pub timeout: Duration,
    /// Held until the answer has been streamed (a function that scales to
    /// zero is not stopped under a request in flight).
    pub lease: Option<Lease>,
}

/// Something a request holds while it is in flight (see [`InvokeTarget::lease`]).
pub type Lease = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// A verified code upload, handed to [`Backend::upload_code`].
#[derive(Debug, Clone)]
pub struct CodeBundle {
    /// The zip bytes, already checked by `codezip::inspect`.
    pub zip: Bytes,
    /// sha256 (hex) of `zip`, verified against the client's claim.
    pub sha256: String,
    /// The client's source hash, stored as given.
    pub source_hash: Option<String>,
}

/// Operations every backend provides. Names and specs arrive validated.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Creates the namespace when missing; idempotent.
    async fn ensure_namespace(&self, namespace: &str) -> Result<NamespaceInfo>;

    /// Creates a function in phase Pending (no code yet).
    /// `Error::AlreadyExists` when the name is taken, `Error::NotFound` when
    /// the namespace does not exist.
    async fn create_function(
        &self,
        namespace: &str,
        name: &str,
        spec: FunctionSpec,
    ) -> Result<Function>;

    /// Reads one function.
    async fn get_function(&self, namespace: &str, name: &str) -> Result<Function>;

    /// Lists a namespace's functions sorted by name.
    async fn list_functions(&self, namespace: &str) -> Result<Vec<Function>>;

    /// Applies a partial update atomically (absent fields are kept). A runtime
    /// change rebuilds; env, entrypoint, memory and timeout changes restart the
    /// process without a rebuild.
    async fn update_function(
        &self,
        namespace: &str,
        name: &str,
        update: UpdateFunction,
    ) -> Result<Function>;

    /// Deletes a function, stopping its build and process. After this returns,
    /// `get_function` answers `NotFound` (possibly after a short Deleting phase).
    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()>;

    /// Stores code and starts a build, exactly once per code version: uploading
    /// the code the function already runs changes nothing.
    async fn upload_code(&self, namespace: &str, name: &str, code: CodeBundle) -> Result<Function>;

    /// The build or run log, optionally only its last `tail` lines.
    async fn read_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String>;

    /// Where to proxy an invocation: `NotFound` for a missing function,
    /// `NotReady` while it builds or restarts.
    async fn invoke_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget>;

    /// Creates a trigger. Its function may not exist yet (phase Waiting).
    /// `Error::AlreadyExists` when the name is taken.
    async fn create_trigger(
        &self,
        _namespace: &str,
        _name: &str,
        _spec: TriggerSpec,
    ) -> Result<Trigger> {
        Err(triggers_unsupported())
    }

    /// Reads one trigger, with its phase as of now.
    async fn get_trigger(&self, _namespace: &str, _name: &str) -> Result<Trigger> {
        Err(triggers_unsupported())
    }

    /// A trigger's spec alone, for routing its public URL on every call
    /// (a backend may answer it from memory); the phase is not computed.
    async fn trigger_spec(&self, namespace: &str, name: &str) -> Result<Arc<TriggerSpec>> {
        Ok(Arc::new(self.get_trigger(namespace, name).await?.spec))
    }

    /// Lists a namespace's triggers sorted by name.
    async fn list_triggers(&self, _namespace: &str) -> Result<Vec<Trigger>> {
        Err(triggers_unsupported())
    }

    /// Applies a partial update; a cron schedule change takes effect at once.
    async fn update_trigger(
        &self,
        _namespace: &str,
        _name: &str,
        _update: UpdateTrigger,
    ) -> Result<Trigger> {
        Err(triggers_unsupported())
    }

    /// Deletes a trigger; no run starts after this returns.
    async fn delete_trigger(&self, _namespace: &str, _name: &str) -> Result<()> {
        Err(triggers_unsupported())
    }

    /// The trigger's log (cron runs and skipped ticks), optionally its last `tail` lines.
    async fn read_trigger_logs(
        &self,
        _namespace: &str,
        _name: &str,
        _tail: Option<usize>,
    ) -> Result<String> {
        Err(triggers_unsupported())
    }

    /// Creates a job in phase Pending (no code yet), generation 1.
    /// `Error::AlreadyExists` when the name is taken.
    async fn create_job(&self, _namespace: &str, _name: &str, _spec: JobSpec) -> Result<Job> {
        Err(unsupported("jobs"))
    }

    /// Reads one job.
    async fn get_job(&self, _namespace: &str, _name: &str) -> Result<Job> {
        Err(unsupported("jobs"))
    }

    /// Lists a namespace's jobs sorted by name.
    async fn list_jobs(&self, _namespace: &str) -> Result<Vec<Job>> {
        Err(unsupported("jobs"))
    }

    /// Applies a partial update; a change bumps the generation and reruns.
    async fn update_job(&self, _namespace: &str, _name: &str, _update: UpdateJob) -> Result<Job> {
        Err(unsupported("jobs"))
    }

    /// Deletes a job, killing a running build or run.
    async fn delete_job(&self, _namespace: &str, _name: &str) -> Result<()> {
        Err(unsupported("jobs"))
    }

    /// Stores code; new code bumps the generation and runs the job.
    async fn upload_job_code(
        &self,
        _namespace: &str,
        _name: &str,
        _code: CodeBundle,
    ) -> Result<Job> {
        Err(unsupported("jobs"))
    }

    /// A job's build or run log, optionally only its last `tail` lines.
    async fn read_job_logs(
        &self,
        _namespace: &str,
        _name: &str,
        _kind: LogKind,
        _tail: Option<usize>,
    ) -> Result<String> {
        Err(unsupported("jobs"))
    }

    /// Creates a service in phase Pending (no code yet).
    /// `Error::AlreadyExists` when the name is taken.
    async fn create_service(
        &self,
        _namespace: &str,
        _name: &str,
        _spec: ServiceSpec,
    ) -> Result<Service> {
        Err(unsupported("services"))
    }

    /// Reads one service.
    async fn get_service(&self, _namespace: &str, _name: &str) -> Result<Service> {
        Err(unsupported("services"))
    }

    /// Lists a namespace's services sorted by name.
    async fn list_services(&self, _namespace: &str) -> Result<Vec<Service>> {
        Err(unsupported("services"))
    }

    /// Applies a partial update: a runtime change rebuilds, anything else
    /// restarts the process in place without a rebuild.
    async fn update_service(
        &self,
        _namespace: &str,
        _name: &str,
        _update: UpdateService,
    ) -> Result<Service> {
        Err(unsupported("services"))
    }

    /// Deletes a service, stopping its build and process.
    async fn delete_service(&self, _namespace: &str, _name: &str) -> Result<()> {
        Err(unsupported("services"))
    }

    /// Stores code and (re)builds and starts the service, once per code version.
    async fn upload_service_code(
        &self,
        _namespace: &str,
        _name: &str,
        _code: CodeBundle,
    ) -> Result<Service> {
        Err(unsupported("services"))
    }

    /// A service's build or run log, optionally only its last `tail` lines.
    async fn read_service_logs(
        &self,
        _namespace: &str,
        _name: &str,
        _kind: LogKind,
        _tail: Option<usize>,
    ) -> Result<String> {
        Err(unsupported("services"))
    }

    /// Where the public service URL proxies to: `NotFound` for a missing
    /// service, `NotReady` while it builds or restarts.
    async fn service_target(&self, _namespace: &str, _name: &str) -> Result<InvokeTarget> {
        Err(unsupported("services"))
    }

    /// The backend's own Prometheus series in the text exposition format
    /// (appended to the API's on `/metrics`); empty when it has none.
    fn metrics_text(&self) -> String {
        String::new()
    }

    /// Warnings an operator must see on `/healthz` (e.g. user code running
    /// unsandboxed); empty when all is as it should be.
    fn health_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Stops everything the backend runs (function processes, builds) cleanly.
    async fn shutdown(&self);
}

fn triggers_unsupported() -> crate::Error {
    crate::Error::Unsupported("triggers are not supported by this backend yet".into())
}

fn unsupported(what: &str) -> crate::Error {
    crate::Error::Unsupported(format!("{what} are not supported by this backend yet"))
}
