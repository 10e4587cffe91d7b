//! What jobs and services share with functions in the local backend: their
//! on-disk identity (`job.<name>` / `svc.<name>`, which cannot clash with a
//! function name since a DNS-1123 label has no dot), storing code, building
//! once per code version (the same unpack and dependency cache as functions),
//! the runtime launch (the same environment as a function), and removing
//! every trace on delete. And what services share with functions (see
//! [`Served`]): a slot per object whose worker generation decides who may
//! write status, switching traffic to a new process, failing, and the
//! restart loop with backoff.

use super::build::{self, Built};
use super::scale::Scale;
use super::supervisor::{Backoff, LineSink, Proc};
use super::{Inner, Key, SWITCH_DRAIN, pid_file};
use crate::backend::{CodeBundle, InvokeTarget};
use crate::{Error, Result};
use sless_wire::function::{FunctionSpec, FunctionStatus, LogKind};
use sless_wire::{Function, Phase, Runtime, paths};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Worker slots of one kind of object, keyed by (namespace, name).
pub struct Slots<S> {
    map: Mutex<HashMap<Key, S>>,
}

impl<S> Default for Slots<S> {
    fn default() -> Self {
        Slots {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<S> Slots<S> {
    /// Locks the map (a poisoned lock is recovered: slots stay consistent).
    pub fn lock(&self) -> MutexGuard<'_, HashMap<Key, S>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The slot of a function or service: its worker, that worker's generation
/// (only the current generation writes status), and the process serving it.
#[derive(Default)]
pub struct Slot {
    /// The generation of the current worker.
    pub generation: u64,
    /// The current worker task.
    pub worker: Option<tokio::task::JoinHandle<()>>,
    /// The process traffic goes to.
    pub active: Option<Arc<Proc>>,
    /// Demand on a function (requests in flight, the last one, its settings).
    pub scale: Arc<Scale>,
    /// True while a function is scaled to zero and its worker waits for a
    /// request.
    pub at_zero: bool,
    /// Set by a request for a function at zero; the worker starts it.
    pub wanted: bool,
    /// Why the last cold start failed (for the requests that waited on it).
    pub cold_error: Option<String>,
    /// A process being stopped for being idle (a delete waits for it too).
    pub stopping: Option<Arc<Proc>>,
    /// A function's `timeout_sec`, once its worker or an update set it
    /// (the invoke path's fast lookup needs it).
    pub timeout: Option<Duration>,
}

impl Slot {
    /// Where a request goes now: the live process, if any, with `timeout`;
    /// with `leased`, the request holds a [`Scale`] lease while in flight.
    pub fn target(&self, timeout: Duration, leased: bool) -> Option<InvokeTarget> {
        let p = self.active.as_ref().filter(|p| !p.has_exited())?;
        Some(InvokeTarget {
            base_url: p.base_url(),
            client: p.client(),
            timeout,
            lease: leased.then(|| Arc::new(self.scale.lease()) as crate::backend::Lease),
        })
    }
}

/// Why [`Inner::supervise`] returned.
pub(super) enum Ended {
    /// The object is gone or a newer worker took over.
    Gone,
    /// Idle for its `idle_timeout_sec`: the process was taken out of the
    /// slot (which is now at zero) and is to be stopped.
    Idle(Arc<Proc>),
}

/// True while `generation` is the current one of `k`'s slot.
pub fn is_current(slots: &HashMap<Key, Slot>, k: &Key, generation: u64) -> bool {
    slots.get(k).is_some_and(|s| s.generation == generation)
}

/// What the serving code shared by functions and services (the `impl
/// Inner` items below that take a `S: Served`) needs to know of each kind.
pub(super) trait Served {
    /// `function` or `service`, as in log lines and errors.
    const NOUN: &'static str;
    /// Its stored status.
    type Status;
    /// The slots of this kind.
    fn slots(inner: &Inner) -> &Slots<Slot>;
    /// Its on-disk identity (builds, logs, pid file) given its name.
    fn id(name: &str) -> String;
    /// Changes the stored status (generation not checked); false when the
    /// object is gone or the write failed (logged).
    fn write_status(inner: &Inner, k: &Key, f: impl FnOnce(&mut Self::Status)) -> bool;
    /// Marks the status Failed with `message`.
    fn failed(s: &mut Self::Status, message: String);
    /// After the serving process exited (restart in `delay`): counts the
    /// restart and says so; returns the new count.
    fn exited(s: &mut Self::Status, how: &str, delay: Duration) -> u32;
    /// Once restart number `restarts` serves.
    fn restarted(s: &mut Self::Status, how: &str, restarts: u32);
    /// After a failed restart attempt (the next in `delay`).
    fn retrying(s: &mut Self::Status, msg: &str, delay: Duration, restarts: u32);
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
    /// Names and hash of the secret environment (values read at launch).
    pub secret_env_vars: &'a sless_wire::SecretEnv,
    /// Memory limit in MiB.
    pub memory_mb: u32,
    /// Timeout in seconds.
    pub timeout_sec: u32,
}

impl Inner {
    /// Bumps the generation of `k`'s slot and replaces its worker with
    /// `work(inner, k, generation)`; nothing once shutting down.
    pub(super) fn replace_worker<F: Future<Output = ()> + Send + 'static>(
        self: &Arc<Self>,
        slots: &mut HashMap<Key, Slot>,
        k: Key,
        work: impl FnOnce(Arc<Inner>, Key, u64) -> F,
    ) {
        if self.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let generation = self.next_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let slot = slots.entry(k.clone()).or_default();
        slot.generation = generation;
        if let Some(w) = slot.worker.take() {
            w.abort();
        }
        // A scale-down the aborted worker was in the middle of finishes here.
        if let Some(p) = slot.stopping.take() {
            let grace = self.opts.stop_grace;
            tokio::spawn(async move { p.stop(grace).await });
        }
        slot.worker = Some(tokio::spawn(work(self.clone(), k, generation)));
    }

    /// Changes the status while `generation` is current; false otherwise.
    pub(super) fn set_status<S: Served>(
        &self,
        k: &Key,
        generation: u64,
        f: impl FnOnce(&mut S::Status),
    ) -> bool {
        let slots = S::slots(self).lock();
        is_current(&slots, k, generation) && S::write_status(self, k, f)
    }

    /// Appends to the build log of `k`.
    pub(super) fn build_log<S: Served>(&self, k: &Key, text: &str) {
        self.logs.append(&k.0, &S::id(&k.1), LogKind::Build, text);
    }

    /// Where the output of `k`'s process goes: its run log.
    pub(super) fn run_sink<S: Served>(&self, k: &Key) -> LineSink {
        let logs = self.logs.clone();
        let (ns, id) = (k.0.clone(), S::id(&k.1));
        Arc::new(move |line: &str| logs.append(&ns, &id, LogKind::Run, line))
    }

    /// Writes `<data-dir>/run/<ns>/<id>.pid`: "PID PORT" of the serving process.
    pub(super) fn write_pid_file<S: Served>(&self, k: &Key, proc: &Proc) {
        let path = pid_file(&self.opts.data_dir, &k.0, &S::id(&k.1));
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&path, format!("{} {}\n", proc.pid, proc.port));
    }

    fn remove_pid_file<S: Served>(&self, k: &Key) {
        let _ = std::fs::remove_file(pid_file(&self.opts.data_dir, &k.0, &S::id(&k.1)));
    }

    /// Marks `k` Failed (while `generation` is current) and stops whatever
    /// served it.
    pub(super) async fn fail<S: Served>(&self, k: &Key, generation: u64, message: String) {
        let old = {
            let mut slots = S::slots(self).lock();
            if !is_current(&slots, k, generation) {
                return;
            }
            S::write_status(self, k, |s| S::failed(s, message.clone()));
            slots.get_mut(k).and_then(|s| {
                s.at_zero = false;
                s.cold_error = Some(message.clone());
                s.scale.announce();
                s.active.take()
            })
        };
        self.build_log::<S>(k, &format!("FAILED: {message}"));
        self.remove_pid_file::<S>(k);
        if let Some(old) = old {
            old.stop(self.opts.stop_grace).await;
        }
    }

    /// Sends `k`'s traffic to `proc` with the status `ready` (while
    /// `generation` is current, else `None`: dropping `proc` kills it),
    /// writing the pid file first. `Some` of the process it replaced, if any: stop
    /// it with [`Inner::retire`].
    pub(super) fn go_live<S: Served>(
        &self,
        k: &Key,
        generation: u64,
        proc: &Arc<Proc>,
        ready: impl FnOnce(&mut S::Status),
    ) -> Option<Option<Arc<Proc>>> {
        let old = {
            let mut slots = S::slots(self).lock();
            if !is_current(&slots, k, generation) {
                return None;
            }
            // Before the status says Ready: whoever sees Ready finds the
            // new process's pid file, not the old one's.
            self.write_pid_file::<S>(k, proc);
            S::write_status(self, k, ready);
            slots.get_mut(k).and_then(|s| {
                s.at_zero = false;
                s.wanted = false;
                s.cold_error = None;
                // The idle time counts from now.
                s.scale.touch();
                s.scale.announce();
                s.active.replace(proc.clone())
            })
        };
        Some(old)
    }

    /// Stops a replaced process once requests that picked it just before
    /// the switch have had time to reach it.
    pub(super) async fn retire(&self, old: Option<Arc<Proc>>) {
        if let Some(old) = old {
            tokio::time::sleep(SWITCH_DRAIN).await;
            old.stop(self.opts.stop_grace).await;
        }
    }

    /// Restarts `k`'s process with backoff whenever it exits, for as long as
    /// `generation` is current. `start` starts a new process (`None` when
    /// the object is gone, which ends the loop). With `idle` (a function
    /// that may scale to zero), returns [`Ended::Idle`] once it has been
    /// idle for its `idle_timeout_sec`.
    pub(super) async fn supervise<S: Served, F>(
        &self,
        k: &Key,
        generation: u64,
        mut proc: Arc<Proc>,
        start: impl Fn() -> F,
        idle: Option<&Scale>,
    ) -> Ended
    where
        F: Future<Output = Option<std::result::Result<Arc<Proc>, String>>>,
    {
        let mut backoff = Backoff::default();
        let sink = self.run_sink::<S>(k);
        loop {
            let how = loop {
                let idle_now = async {
                    match idle {
                        Some(scale) => scale.until_idle().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    how = proc.wait_exit() => break how,
                    () = idle_now => {
                        if let Some(ended) = self.take_if_idle::<S>(k, generation, &proc) {
                            return ended;
                        }
                    }
                }
            };
            let mut delay = backoff.delay(proc.started.elapsed());
            let mut restarts = 0;
            {
                let mut slots = S::slots(self).lock();
                match slots.get_mut(k) {
                    Some(s)
                        if s.generation == generation
                            && s.active.as_ref().is_some_and(|a| Arc::ptr_eq(a, &proc)) =>
                    {
                        s.active = None;
                    }
                    _ => return Ended::Gone,
                }
                S::write_status(self, k, |s| restarts = S::exited(s, &how, delay));
            }
            self.remove_pid_file::<S>(k);
            sink(&format!(
                "sless: {} process {how}; restarting in {} ms",
                S::NOUN,
                delay.as_millis()
            ));
            loop {
                tokio::time::sleep(delay).await;
                let Some(started) = start().await else {
                    return Ended::Gone;
                };
                match started {
                    Ok(p) => {
                        let mut slots = S::slots(self).lock();
                        if !is_current(&slots, k, generation) {
                            return Ended::Gone;
                        }
                        if let Some(s) = slots.get_mut(k) {
                            s.active = Some(p.clone());
                            // Requests held for a cold start whose process
                            // died at once are served by this one.
                            s.scale.announce();
                        }
                        self.write_pid_file::<S>(k, &p);
                        S::write_status(self, k, |s| S::restarted(s, &how, restarts));
                        drop(slots);
                        proc = p;
                        break;
                    }
                    Err(msg) => {
                        delay = backoff.delay(Duration::ZERO);
                        sink(&format!(
                            "sless: restart failed: {msg}; retrying in {} ms",
                            delay.as_millis()
                        ));
                        self.set_status::<S>(k, generation, |s| {
                            S::retrying(s, &msg, delay, restarts)
                        });
                    }
                }
            }
        }
    }

    /// Under the slots' lock: when `proc` still serves the current
    /// generation and nothing used it since the idle check, takes it out of
    /// the slot and marks the slot at zero (what `status.instances` reports).
    /// `None` when a request came in between (keep serving).
    fn take_if_idle<S: Served>(&self, k: &Key, generation: u64, proc: &Arc<Proc>) -> Option<Ended> {
        let mut slots = S::slots(self).lock();
        let Some(slot) = slots.get_mut(k) else {
            return Some(Ended::Gone);
        };
        if slot.generation != generation
            || !slot.active.as_ref().is_some_and(|a| Arc::ptr_eq(a, proc))
        {
            return Some(Ended::Gone);
        }
        if slot.scale.idle_in().is_some() {
            return None;
        }
        let taken = slot.active.take()?;
        slot.stopping = Some(taken.clone());
        slot.at_zero = true;
        slot.wanted = false;
        drop(slots);
        self.remove_pid_file::<S>(k);
        Some(Ended::Idle(taken))
    }

    /// Where `k`'s traffic goes (the process serving it, with `timeout_sec`),
    /// or why it cannot go anywhere now (its `phase` and status `message`).
    /// A request for one that is Ready but restarting its process is held
    /// for the restarted one ([`Inner::held_target`], up to [`RESTART_HOLD`]).
    pub(super) async fn serving_target<S: Served>(
        &self,
        k: &Key,
        timeout_sec: u32,
        phase: Phase,
        message: Option<String>,
    ) -> Result<InvokeTarget> {
        let timeout = Duration::from_secs(u64::from(timeout_sec));
        let changed = {
            let slots = S::slots(self).lock();
            let Some(slot) = slots.get(k) else {
                return Err(not_serving::<S>(k, phase, message));
            };
            if let Some(t) = slot.target(timeout, false) {
                return Ok(t);
            }
            if phase != Phase::Ready || slot.at_zero || slot.worker.is_none() {
                return Err(not_serving::<S>(k, phase, message));
            }
            slot.scale.subscribe()
        };
        let hold = timeout.min(RESTART_HOLD);
        let gone = || not_serving::<S>(k, Phase::Deleting, None);
        match self
            .held_target::<S>(k, changed, timeout, hold, false, gone)
            .await
        {
            Some(answer) => answer,
            None => Err(restart_timed_out::<S>(k, hold, message)),
        }
    }

    /// Holds a request for `k` until its slot has a live process (announced
    /// on `changed`) and answers with it (the rest of `timeout` is the
    /// request's; `leased` as in [`Slot::target`]): `Err` when its cold start
    /// failed, it was changed, or its slot is gone (`gone()`); `None` when
    /// `hold` passed first.
    pub(super) async fn held_target<S: Served>(
        &self,
        k: &Key,
        mut changed: tokio::sync::watch::Receiver<u64>,
        timeout: Duration,
        hold: Duration,
        leased: bool,
        gone: impl Fn() -> Error,
    ) -> Option<Result<InvokeTarget>> {
        let t0 = std::time::Instant::now();
        let (noun, name) = (S::NOUN, &k.1);
        let wait = async {
            loop {
                if changed.changed().await.is_err() {
                    return Err(Error::NotReady(format!(
                        "{noun} {name:?} was changed or deleted while starting"
                    )));
                }
                let slots = S::slots(self).lock();
                let Some(slot) = slots.get(k) else {
                    return Err(gone());
                };
                let left = timeout.saturating_sub(t0.elapsed());
                if let Some(t) = slot.target(left.max(Duration::from_millis(100)), leased) {
                    return Ok(t);
                }
                if let Some(why) = &slot.cold_error {
                    return Err(Error::NotReady(format!(
                        "{noun} {name:?} could not start: {why}"
                    )));
                }
            }
        };
        tokio::time::timeout(hold, wait).await.ok()
    }
}

/// How long a request for a function or service that is up but restarting
/// its process (after a crash, an operator restart or an update) waits for
/// the new one before a 503 (at most its `timeout_sec`). The first restart
/// comes after 0.5 s; a process that keeps crashing backs off for longer
/// than this, and its requests get the 503 with the status message instead
/// of a long wait.
pub(super) const RESTART_HOLD: Duration = Duration::from_secs(10);

/// The 503 of a request held [`RESTART_HOLD`] (`hold`) for `k`'s restarting
/// process in vain, with the status `message` it saw.
pub(super) fn restart_timed_out<S: Served>(
    k: &Key,
    hold: Duration,
    message: Option<String>,
) -> Error {
    Error::NotReady(format!(
        "{} {:?} is restarting its process and was not back within {} s: {}",
        S::NOUN,
        k.1,
        hold.as_secs(),
        message.as_deref().unwrap_or("no status message")
    ))
}

/// Why `k` cannot take a request now, from its `phase` and status `message`.
pub(super) fn not_serving<S: Served>(k: &Key, phase: Phase, message: Option<String>) -> Error {
    let (noun, name, why) = (S::NOUN, &k.1, message.unwrap_or_default());
    Error::NotReady(match phase {
        Phase::Pending => format!("{noun} {name:?} has no code yet: upload code first"),
        Phase::Building => format!("{noun} {name:?} is building: {why}"),
        Phase::Failed => format!("{noun} {name:?} failed: {why}"),
        Phase::Deleting => format!("{noun} {name:?} is being deleted"),
        Phase::Ready if why.is_empty() => {
            format!("{noun} {name:?} is (re)starting its process; retry shortly")
        }
        Phase::Ready => format!("{noun} {name:?} is (re)starting its process: {why}"),
    })
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
        if let Some(sha) = sha {
            let _gc = self.code_gc.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(self.db.code_in_use(sha), Ok(false)) {
                self.store.remove(sha);
            }
        }
    }

    /// Called once a row refers to `code`: writes its zip again if a
    /// concurrent [`Inner::release_code`] removed it after `store_code`
    /// (another object with the same code was deleted in between). A failure
    /// is logged; the build then fails saying the code is missing.
    pub(super) fn keep_stored(&self, code: &CodeBundle) {
        let _gc = self.code_gc.lock().unwrap_or_else(|e| e.into_inner());
        if !self.store.path(&code.sha256).exists()
            && let Err(e) = self.store.put(&code.sha256, &code.zip)
        {
            tracing::warn!(sha256 = %code.sha256, error = %e, "cannot store an uploaded zip again");
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
        let built = self.build_now(ns, id, sha, runtime).await?;
        self.prune_builds(&(ns.to_string(), id.to_string()), sha);
        Ok((built, true))
    }

    /// Builds this code for this runtime, logged to a fresh build log of `id`.
    pub(super) async fn build_now(
        &self,
        ns: &str,
        id: &str,
        sha: &str,
        runtime: Runtime,
    ) -> std::result::Result<Built, String> {
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
            sandbox: match &self.sandbox {
                Some(sb) => Some((sb.clone(), self.sandbox_uid(ns)?)),
                None => None,
            },
        };
        build::build(&env, sha, runtime, &self.store.path(sha)).await
    }

    /// The launch of a runtime for `spec` with the environment of a function
    /// (user env sorted, `PYTHONPATH` for dependencies, `SLESS_*`).
    pub(super) fn runtime_launch(
        &self,
        ns: &str,
        id: &str,
        spec: &RunSpec<'_>,
        built: &Built,
    ) -> std::result::Result<super::supervisor::Launch, String> {
        let as_function = Function {
            namespace: ns.to_string(),
            name: id.to_string(),
            spec: FunctionSpec {
                runtime: spec.runtime,
                entrypoint: spec.entrypoint.clone(),
                env_vars: spec.env_vars.clone(),
                secret_env_vars: spec.secret_env_vars.clone(),
                memory_mb: spec.memory_mb,
                timeout_sec: spec.timeout_sec,
                min_instances: 1,
                idle_timeout_sec: sless_wire::limits::IDLE_TIMEOUT_SEC_DEFAULT,
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
                instances: 0,
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
        if let Err(e) = super::secrets::remove(data_dir, ns, id) {
            tracing::error!(error = %e, "cannot remove the secrets of a deleted object");
        }
        self.logs.remove(ns, id);
    }

    /// Writes the secret values `s` carries for `id` (see `secrets.rs`).
    pub(super) fn store_secrets(
        &self,
        ns: &str,
        id: &str,
        s: &sless_wire::SecretEnv,
    ) -> Result<()> {
        use super::secrets::SecretsError;
        super::secrets::store(&self.opts.data_dir, ns, id, s).map_err(|e| match e {
            // A full disk is a 507 like any other write (api/error.rs).
            SecretsError::Io {
                context,
                path,
                source,
            } => Error::Io {
                context: format!("{context} {}", path.display()),
                source,
            },
            other => Error::Internal(other.to_string()),
        })
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
