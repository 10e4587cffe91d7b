//! What jobs and services share in the local backend: their on-disk identity
//! (`job.<name>` / `svc.<name>`, which cannot clash with a function name since
//! a DNS-1123 label has no dot), storing code, building once per code version
//! (the same unpack and dependency cache as functions), the runtime launch
//! (the same environment as a function), and removing every trace on delete.

use super::build::{self, Built};
use super::{Inner, Key};
use crate::backend::CodeBundle;
use crate::{Error, Result};
use sless_wire::function::{FunctionSpec, FunctionStatus, LogKind};
use sless_wire::{Function, Phase, Runtime, paths};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Worker slots of one kind of object, keyed by (namespace, name).
pub struct Slots<S> {
    map: Mutex<std::collections::HashMap<Key, S>>,
}

impl<S> Default for Slots<S> {
    fn default() -> Self {
        Slots {
            map: Mutex::new(std::collections::HashMap::new()),
        }
    }
}

impl<S> Slots<S> {
    /// Locks the map (a poisoned lock is recovered: slots stay consistent).
    pub fn lock(&self) -> MutexGuard<'_, std::collections::HashMap<Key, S>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The on-disk identity of a job or service: `<prefix>.<name>`.
pub fn ident(prefix: &str, name: &str) -> String {
    format!("{prefix}.{name}")
}

/// The parts of a spec a runtime launch needs.
pub struct RunSpec<'a> {
    /// Runtime.
    pub runtime: Runtime,
    /// `module.function` (jobs) or what the service runs (for `SLESS_ENTRYPOINT`).
    pub entrypoint: String,
    /// User environment.
    pub env_vars: &'a BTreeMap<String, String>,
    /// Memory limit in MiB.
    pub memory_mb: u32,
    /// Timeout in seconds.
    pub timeout_sec: u32,
}

impl Inner {
    /// Fails with `NotFound` when the namespace was never ensured.
    pub(super) fn require_namespace(&self, ns: &str) -> Result<()> {
        if self.db.namespace_exists(ns)? {
            Ok(())
        } else {
            Err(Error::NotFound {
                kind: "namespace",
                namespace: ns.to_string(),
                name: ns.to_string(),
            })
        }
    }

    /// Stores an uploaded zip in the content-addressed store.
    pub(super) async fn store_code(&self, code: &CodeBundle) -> Result<()> {
        let store = self.store.clone();
        let sha = code.sha256.clone();
        let zip = code.zip.clone();
        tokio::task::spawn_blocking(move || store.put(&sha, &zip))
            .await
            .map_err(|e| Error::Internal(format!("storing code: {e}")))??;
        Ok(())
    }

    /// Removes a stored zip nothing refers to any more.
    pub(super) fn release_code(&self, sha: Option<&str>) {
        if let Some(sha) = sha
            && matches!(self.db.code_in_use(sha), Ok(false))
        {
            self.store.remove(sha);
        }
    }

    /// The build of this code for this runtime: the existing one unless
    /// `rebuild`, else a fresh build logged to `id`'s build log. The bool says
    /// whether it was built now.
    pub(super) async fn ensure_built(
        &self,
        ns: &str,
        id: &str,
        sha: &str,
        runtime: Runtime,
        rebuild: bool,
    ) -> std::result::Result<(Built, bool), String> {
        if !rebuild && let Some(b) = build::load_built(&self.opts.data_dir, ns, id, sha, runtime) {
            return Ok((b, false));
        }
        self.logs.rotate(ns, id, LogKind::Build);
        self.logs.append(
            ns,
            id,
            LogKind::Build,
            &format!(
                "=== build of {ns}/{id} code {} for {runtime} at {}",
                build::short_sha(sha),
                super::db::now_rfc3339()
            ),
        );
        let env = build::BuildEnv {
            data_dir: self.opts.data_dir.clone(),
            db: self.db.clone(),
            logs: self.logs.clone(),
            ns: ns.to_string(),
            name: id.to_string(),
            python: self.opts.python.clone(),
            npm: self.opts.npm.clone(),
            timeout: self.opts.build_timeout,
        };
        let built = build::build(&env, sha, runtime, &self.store.path(sha)).await?;
        self.prune_builds(&(ns.to_string(), id.to_string()), sha);
        Ok((built, true))
    }

    /// The launch of a runtime for `spec` with the environment of a function
    /// (user env sorted, `PYTHONPATH` for dependencies, `SLESS_*`).
    pub(super) fn runtime_launch(
        &self,
        ns: &str,
        id: &str,
        spec: &RunSpec<'_>,
        built: &Built,
    ) -> super::supervisor::Launch {
        let as_function = Function {
            namespace: ns.to_string(),
            name: id.to_string(),
            spec: FunctionSpec {
                runtime: spec.runtime,
                entrypoint: spec.entrypoint.clone(),
                env_vars: spec.env_vars.clone(),
                memory_mb: spec.memory_mb,
                timeout_sec: spec.timeout_sec,
            },
            status: FunctionStatus {
                phase: Phase::Building,
                message: None,
                code_sha256: None,
                source_hash: None,
                image_ref: None,
                last_built_at: None,
                invoke_path: paths::function_invoke(ns, id),
                restarts: 0,
            },
            created_at: String::new(),
            updated_at: String::new(),
        };
        self.launch_for(&as_function, built)
    }

    /// Removes the build dir, pid file and logs of `id`.
    pub(super) fn remove_traces(&self, ns: &str, id: &str) {
        let data_dir = &self.opts.data_dir;
        let _ = std::fs::remove_file(super::pid_file(data_dir, ns, id));
        let _ = std::fs::remove_dir_all(data_dir.join("builds").join(ns).join(id));
        self.logs.remove(ns, id);
    }

    /// Reads `id`'s log off the async threads.
    pub(super) async fn read_log(
        &self,
        ns: &str,
        id: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let logs = self.logs.clone();
        let (ns, id) = (ns.to_string(), id.to_string());
        tokio::task::spawn_blocking(move || logs.read(&ns, &id, kind, tail))
            .await
            .map_err(|e| Error::Internal(format!("reading logs: {e}")))
    }
}
