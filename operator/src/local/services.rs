//! Services in the local backend: the user's own long-running server,
//! started from its unpacked code (`python3 <entrypoint>`, `node
//! <entrypoint>`, or `command` as given) with `PORT` (a free loopback port
//! the operator picks) and `HOST=127.0.0.1`, ready once `GET <health_path>`
//! answers below 500, restarted with backoff whenever it dies.
//!
//! Like functions, each service has a worker per change: a code or runtime
//! change rebuilds; any other spec change starts a new process from the same
//! build, switches traffic to it once it is ready, then stops the old one.

use super::build::Built;
use super::db::now_rfc3339;
use super::supervisor::{self, Launch, Proc, Readiness};
use super::workload::{RunSpec, Served, Slot, Slots, ident};
use super::{Inner, Key, Plan, key};
use crate::Result;
use crate::backend::{CodeBundle, InvokeTarget};
use sless_wire::{Phase, Service, ServiceSpec, ServiceStatus, UpdateService};
use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

/// `svc.<name>`: the service's identity for builds, logs and process records.
pub(super) fn svc_id(name: &str) -> String {
    ident("svc", name)
}

impl Inner {
    /// Replaces the service's worker.
    fn schedule_service(self: &Arc<Self>, slots: &mut HashMap<Key, Slot>, k: Key, plan: Plan) {
        self.replace_worker(slots, k, move |inner, k, generation| async move {
            inner.service_work(k, generation, plan).await
        });
    }

    /// How to start the service from `built` on a fresh loopback port.
    fn service_launch(&self, svc: &Service, built: &Built) -> std::result::Result<Launch, String> {
        let spec = &svc.spec;
        let shown = spec
            .entrypoint
            .clone()
            .unwrap_or_else(|| spec.command.join(" "));
        let id = svc_id(&svc.name);
        let mut launch = self.runtime_launch(
            &svc.namespace,
            &id,
            &RunSpec {
                runtime: spec.runtime,
                entrypoint: shown,
                env_vars: &spec.env_vars,
                secret_env_vars: &spec.secret_env_vars,
                memory_mb: spec.memory_mb,
                timeout_sec: spec.timeout_sec,
            },
            built,
        )?;
        // Sandboxed, it has a network namespace of its own: any port is
        // free there, and the bridge in front of it is the way in.
        let port = match &mut launch.sandbox {
            Some(sl) => {
                sl.plan.bridge_port = Some(super::sandbox::SERVICE_PORT_INSIDE);
                super::sandbox::SERVICE_PORT_INSIDE
            }
            None => supervisor::free_port()?,
        };
        // The user's server listens on $PORT, not on a socket of ours.
        launch.env.retain(|(k, _)| k != "SLESS_SOCKET");
        launch.socket = None;
        launch
            .env
            .retain(|(k, _)| !matches!(k.as_str(), "SLESS_PORT" | "SLESS_HOST" | "PORT" | "HOST"));
        launch.env.extend([
            ("PORT".to_string(), port.to_string()),
            ("HOST".to_string(), "127.0.0.1".to_string()),
        ]);
        match (spec.command.split_first(), &spec.entrypoint) {
            (Some((program, args)), _) => {
                launch.program = program.clone();
                launch.args = args.iter().map(OsString::from).collect();
            }
            (None, Some(script)) => {
                // The runtime's interpreter flags stay; the user's script
                // replaces the runtime server.
                if let Some(last) = launch.args.last_mut() {
                    *last = OsString::from(script);
                }
            }
            (None, None) => return Err("the service has neither entrypoint nor command".into()),
        }
        launch.ready = Readiness::Http {
            port,
            path: spec.health_path.clone(),
        };
        Ok(launch)
    }

    /// The worker: build if needed, start, switch traffic, supervise.
    async fn service_work(self: Arc<Self>, k: Key, generation: u64, plan: Plan) {
        let Ok(Some(svc)) = self.db.get_object::<Service>(&k.0, &k.1) else {
            return;
        };
        let Some(sha) = svc.status.code_sha256.clone() else {
            return;
        };
        let id = svc_id(&k.1);
        if plan == Plan::Build {
            self.set_status::<Service>(&k, generation, |s| {
                s.phase = Phase::Building;
                s.message = Some(format!(
                    "building code {} for {}",
                    super::build::short_sha(&sha),
                    svc.spec.runtime
                ));
            });
        }
        let (built, built_now) = match self
            .ensure_built(&k.0, &id, &sha, svc.spec.runtime, plan == Plan::Build)
            .await
        {
            Ok(b) => b,
            Err(msg) => {
                let msg = format!("build failed: {msg}");
                return self.fail::<Service>(&k, generation, msg).await;
            }
        };
        let Ok(Some(svc)) = self.db.get_object::<Service>(&k.0, &k.1) else {
            return;
        };
        let proc = match self.start_service(&svc, &built).await {
            Ok(p) => p,
            Err(msg) => {
                let msg = format!("the service did not start: {msg}");
                return self.fail::<Service>(&k, generation, msg).await;
            }
        };
        let Some(old) = self.go_live::<Service>(&k, generation, &proc, |s| {
            s.phase = Phase::Ready;
            s.message = None;
            if built_now || s.last_built_at.is_none() {
                s.last_built_at = Some(now_rfc3339());
            }
        }) else {
            return; // dropping `proc` kills it
        };
        self.retire(old).await;
        let (inner, key, built) = (&*self, &k, &built);
        let restart = move || async move {
            let Ok(Some(svc)) = inner.db.get_object::<Service>(&key.0, &key.1) else {
                return None;
            };
            Some(inner.start_service(&svc, built).await)
        };
        // Services do not scale to zero.
        self.supervise::<Service, _>(&k, generation, proc, restart, None)
            .await;
    }

    async fn start_service(
        &self,
        svc: &Service,
        built: &Built,
    ) -> std::result::Result<Arc<Proc>, String> {
        let launch = self.service_launch(svc, built)?;
        let k = key(&svc.namespace, &svc.name);
        self.build_log::<Service>(
            &k,
            &format!(
                "starting {} {} in {} (PORT={})",
                launch.program,
                launch
                    .args
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" "),
                launch.cwd.display(),
                match &launch.ready {
                    Readiness::Http { port, .. } => *port,
                    Readiness::Line => 0,
                }
            ),
        );
        supervisor::start(&launch, &self.db, self.run_sink::<Service>(&k)).await
    }

    /// Brings back every service that was Ready (or building) before.
    pub(super) fn restore_services(self: &Arc<Self>) -> Result<usize> {
        let mut n = 0;
        let mut slots = self.services.lock();
        for svc in self.db.list_objects::<Service>(None)? {
            let plan = match svc.status.phase {
                Phase::Ready => Plan::Restart,
                Phase::Building => Plan::Build,
                _ => continue,
            };
            if svc.status.code_sha256.is_some() {
                self.schedule_service(&mut slots, key(&svc.namespace, &svc.name), plan);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Stops every service worker and process (shutdown).
    pub(super) async fn stop_services(&self) {
        let slots: Vec<Slot> = self.services.lock().drain().map(|(_, s)| s).collect();
        let mut procs = Vec::new();
        for s in slots {
            if let Some(w) = s.worker {
                w.abort();
                let _ = w.await;
            }
            procs.extend(s.active);
        }
        let grace = self.opts.stop_grace;
        futures_util::future::join_all(procs.iter().map(|p| p.stop(grace))).await;
    }
}

/// The service operations of the local backend (called by its `Backend` impl).
impl super::LocalBackend {
    /// See `Backend::create_service`.
    pub(super) fn service_create(
        &self,
        ns: &str,
        name: &str,
        spec: ServiceSpec,
    ) -> Result<Service> {
        self.inner.require_namespace(ns)?;
        let now = now_rfc3339();
        let svc = Service {
            namespace: ns.to_string(),
            name: name.to_string(),
            spec,
            status: ServiceStatus {
                phase: Phase::Pending,
                message: Some("waiting for a code upload".into()),
                code_sha256: None,
                source_hash: None,
                url: None,
                last_built_at: None,
                restarts: 0,
            },
            created_at: now.clone(),
            updated_at: now,
        };
        self.inner.db.insert_object(&svc)?;
        let id = svc_id(name);
        if let Err(e) = self.inner.store_secrets(ns, &id, &svc.spec.secret_env_vars) {
            let _ = self.inner.db.delete_object::<Service>(ns, name);
            return Err(e);
        }
        Ok(svc)
    }

    /// See `Backend::update_service`: a runtime change rebuilds; other
    /// changes (except a timeout-only change, which the proxy applies at
    /// once) start a new process from the same build.
    pub(super) fn service_update(
        &self,
        ns: &str,
        name: &str,
        update: UpdateService,
    ) -> Result<Service> {
        let inner = &self.inner;
        let mut slots = inner.services.lock();
        let mut svc = inner.db.object::<Service>(ns, name)?;
        let next = update.apply_to(&svc.spec)?;
        if next == svc.spec {
            return Ok(svc);
        }
        let new_runtime = (next.runtime != svc.spec.runtime).then_some(next.runtime);
        inner.store_secrets(ns, &svc_id(name), &next.secret_env_vars)?;
        let timeout_only = ServiceSpec {
            timeout_sec: svc.spec.timeout_sec,
            ..next.clone()
        } == svc.spec;
        svc.spec = next;
        svc.updated_at = now_rfc3339();
        let s = &mut svc.status;
        let code = s.code_sha256.as_deref();
        let plan = Plan::for_update(
            code,
            new_runtime,
            !timeout_only,
            &mut s.phase,
            &mut s.message,
        );
        inner.db.save_object(&svc)?;
        if let Some(plan) = plan {
            inner.schedule_service(&mut slots, key(ns, name), plan);
        }
        Ok(svc)
    }

    /// See `Backend::upload_service_code`.
    pub(super) async fn service_upload(
        &self,
        ns: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<Service> {
        let inner = &self.inner;
        let unchanged = |s: &Service| {
            s.status.code_sha256.as_deref() == Some(code.sha256.as_str())
                && matches!(s.status.phase, Phase::Ready | Phase::Building)
        };
        let existing = inner.db.object::<Service>(ns, name)?;
        if unchanged(&existing) {
            return Ok(existing);
        }
        inner.store_code(&code).await?;
        let (svc, old) = {
            let mut slots = inner.services.lock();
            // Deleted meanwhile: the zip just stored is nobody's.
            let mut svc = inner
                .db
                .object::<Service>(ns, name)
                .inspect_err(|_| inner.release_code(Some(&code.sha256)))?;
            if unchanged(&svc) {
                return Ok(svc);
            }
            let old = svc.status.code_sha256.replace(code.sha256.clone());
            svc.status.source_hash = code.source_hash.clone();
            svc.status.phase = Phase::Building;
            svc.status.message = Some(format!(
                "building code {}",
                super::build::short_sha(&code.sha256)
            ));
            svc.status.restarts = 0;
            svc.updated_at = now_rfc3339();
            inner
                .db
                .save_object(&svc)
                .inspect_err(|_| inner.release_code(Some(&code.sha256)))?;
            inner.keep_stored(&code);
            inner.schedule_service(&mut slots, key(ns, name), Plan::Build);
            (svc, old)
        };
        if old.as_deref() != Some(code.sha256.as_str()) {
            inner.release_code(old.as_deref());
        }
        Ok(svc)
    }

    /// See `Backend::delete_service`: stops the build and the process first.
    pub(super) async fn service_delete(&self, ns: &str, name: &str) -> Result<()> {
        let inner = &self.inner;
        let (slot, sha) = {
            let mut slots = inner.services.lock();
            let svc = inner.db.object::<Service>(ns, name)?;
            inner.db.delete_object::<Service>(ns, name)?;
            (slots.remove(&key(ns, name)), svc.status.code_sha256)
        };
        if let Some(slot) = slot {
            if let Some(w) = slot.worker {
                w.abort();
                let _ = w.await;
            }
            if let Some(p) = slot.active {
                p.stop(inner.opts.stop_grace).await;
            }
        }
        inner.remove_traces(ns, &svc_id(name));
        inner.release_code(sha.as_deref());
        Ok(())
    }

    /// See `Backend::service_target`.
    pub(super) async fn service_target_of(&self, ns: &str, name: &str) -> Result<InvokeTarget> {
        let svc = self.inner.db.object::<Service>(ns, name)?;
        self.inner
            .serving_target::<Service>(
                &key(ns, name),
                svc.spec.timeout_sec,
                svc.status.phase,
                svc.status.message,
            )
            .await
    }
}

impl Served for Service {
    const NOUN: &'static str = "service";
    type Status = ServiceStatus;

    fn slots(inner: &Inner) -> &Slots<Slot> {
        &inner.services
    }

    fn id(name: &str) -> String {
        svc_id(name)
    }

    fn write_status(inner: &Inner, k: &Key, f: impl FnOnce(&mut ServiceStatus)) -> bool {
        inner.db.modify_object::<Service>(&k.0, &k.1, |svc| {
            f(&mut svc.status);
            true
        })
    }

    fn failed(s: &mut ServiceStatus, message: String) {
        s.phase = Phase::Failed;
        s.message = Some(message);
    }

    fn exited(s: &mut ServiceStatus, how: &str, _delay: Duration) -> u32 {
        s.restarts += 1;
        s.message = Some(format!(
            "the process {how}; restarting (restart {})",
            s.restarts
        ));
        s.restarts
    }

    fn restarted(s: &mut ServiceStatus, how: &str, restarts: u32) {
        s.phase = Phase::Ready;
        s.message = Some(format!(
            "restarted after the process {how} (restart {restarts})"
        ));
    }

    fn retrying(s: &mut ServiceStatus, msg: &str, delay: Duration, restarts: u32) {
        s.message = Some(format!(
            "restart {restarts} failed, retrying in {} ms: {msg}",
            delay.as_millis()
        ));
    }
}
