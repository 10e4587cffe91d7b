//! The embedded local backend: state in SQLite, code stored content-addressed,
//! builds (unpack + dependency install) and every Ready function supervised
//! as a child process on a loopback port. See `docs/local-backend.md`.
//!
//! Each function has a *slot* with a generation number. Every change (code
//! upload, spec update, delete, operator start) bumps the generation and
//! replaces the slot's worker task, which builds if needed, starts the new
//! process, switches traffic to it once it is READY, stops the old one, and
//! then restarts it with backoff whenever it crashes. A worker only writes
//! status while its generation is current, so a stale build can never
//! overwrite a newer state; aborting a worker kills its pip/npm or
//! not-yet-ready process (their process groups are killed on drop).

pub mod bridge;
pub mod build;
pub mod cgroup;
pub mod coldstart;
pub mod cron;
pub mod db;
pub mod jobs;
pub mod logs;
pub mod objects;
pub mod process;
pub mod sandbox;
pub mod scale;
pub mod secrets;
pub mod services;
pub mod sockets;
pub mod store;
pub mod supervisor;
pub mod triggers;
pub mod warm;
pub mod workload;
pub mod zygote;

use crate::backend::{Backend, CodeBundle, InvokeTarget};
use crate::runtimes::{self, RuntimePaths};
use crate::{Error, Result};
use db::{Db, now_rfc3339};
use logs::Logs;
use sless_wire::function::{FunctionSpec, FunctionStatus, LogKind, NamespaceInfo};
use sless_wire::runtime::Language;
use sless_wire::trigger::{Trigger, TriggerSpec, UpdateTrigger};
use sless_wire::{Function, Phase, Runtime, UpdateFunction, paths};
use sless_wire::{Job, JobSpec, Service, ServiceSpec, UpdateJob, UpdateService};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use store::CodeStore;
use supervisor::Launch;
use workload::{Ended, Served, Slot};

/// Options of the local backend. Build it with [`LocalOptions::new`] and
/// adjust fields as needed.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Root of all state: database, code, builds, logs.
    pub data_dir: PathBuf,
    /// Python interpreter for builds and functions (default `python3`).
    pub python: String,
    /// Node.js binary (default `node`).
    pub node: String,
    /// npm binary (default `npm`).
    pub npm: String,
    /// How long a function process may take to print its READY line (30 s).
    pub ready_timeout: Duration,
    /// Longest a dependency install may take (10 min).
    pub build_timeout: Duration,
    /// Size of each log file before rotation (1 MiB).
    pub log_max_bytes: u64,
    /// How long a stopping process gets between SIGTERM and SIGKILL (5 s).
    pub stop_grace: Duration,
    /// How user processes are isolated. `None` here for embedders and
    /// in-process tests; `sless-operator serve` defaults to `Strict`.
    pub isolation: sandbox::Isolation,
    /// Limits of the strict sandbox.
    pub sandbox: sandbox::Settings,
    /// Cold-start Python functions by forking their namespace's pre-imported
    /// zygote (default true; false starts every process fresh).
    pub zygote: bool,
    /// How long a namespace's zygote or warm Node process is kept when no
    /// cold start or scale-down asked for it (15 min; zero keeps them until
    /// shutdown).
    pub warm_idle: Duration,
}

impl LocalOptions {
    /// Defaults for a data dir.
    pub fn new(data_dir: impl Into<PathBuf>) -> LocalOptions {
        LocalOptions {
            data_dir: data_dir.into(),
            python: "python3".into(),
            node: "node".into(),
            npm: "npm".into(),
            ready_timeout: Duration::from_secs(30),
            build_timeout: Duration::from_secs(600),
            log_max_bytes: 1024 * 1024,
            stop_grace: Duration::from_secs(5),
            isolation: sandbox::Isolation::None,
            sandbox: sandbox::Settings::default(),
            zygote: true,
            warm_idle: Duration::from_secs(900),
        }
    }
}

/// Logged at start and shown on `/healthz` under `--isolation none`.
pub const ISOLATION_NONE_WARNING: &str = "isolation none: user code runs unsandboxed as the operator's user and can read its key and every namespace's code; use --isolation strict for anything but trusted code";

/// Memory limit of a zygote's own cgroup, MiB (its forked functions each
/// have their own).
const ZYGOTE_MEMORY_MB: u32 = 256;

/// A function's `timeout_sec` as the proxy's timeout.
fn timeout_of(spec: &FunctionSpec) -> Duration {
    Duration::from_secs(u64::from(spec.timeout_sec))
}

/// V8's heap limit for a function of `memory_mb`: three quarters of it (the
/// cgroup, or the RSS watchdog, enforces the whole).
fn node_heap_mb(memory_mb: u32) -> u32 {
    (memory_mb * 3 / 4).max(32)
}

/// How long a replaced process keeps serving after traffic switched away.
const SWITCH_DRAIN: Duration = Duration::from_secs(1);

type Key = (String, String);

fn key(ns: &str, name: &str) -> Key {
    (ns.to_string(), name.to_string())
}

/// What a worker does before supervising.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Unpack and install dependencies, then start.
    Build,
    /// Start from the existing build (building when it is missing).
    Restart,
    /// A function that scales to zero, after an operator restart: at zero
    /// on its existing build until a request comes (built and started at
    /// once when the build is missing).
    Idle,
}

impl Plan {
    /// What an accepted spec change of a function or service means: nothing
    /// without code; a rebuild when the runtime changed (`new_runtime`); a
    /// new process from the same build when `restart`; else nothing. When
    /// anything is to happen, the status says Building and why.
    fn for_update(
        code: Option<&str>,
        new_runtime: Option<Runtime>,
        restart: bool,
        phase: &mut Phase,
        message: &mut Option<String>,
    ) -> Option<Plan> {
        code?;
        let (plan, why) = match new_runtime {
            Some(runtime) => (Plan::Build, format!("rebuilding for runtime {runtime}")),
            None if restart => (Plan::Restart, "restarting with the updated spec".into()),
            None => return None,
        };
        *phase = Phase::Building;
        *message = Some(why);
        Some(plan)
    }
}

struct Inner {
    opts: LocalOptions,
    db: Arc<Db>,
    logs: Arc<Logs>,
    store: CodeStore,
    /// Held while a stored zip's references are checked and it is removed,
    /// or while an upload makes sure the zip it just referenced is there.
    code_gc: Mutex<()>,
    runtimes: RuntimePaths,
    /// Functions' workers and processes.
    slots: workload::Slots<Slot>,
    next_generation: AtomicU64,
    shutting_down: AtomicBool,
    /// flock on `local.lock`: one operator per data dir; released by `shutdown`.
    lock: Mutex<Option<std::fs::File>>,
    /// Triggers: their table, logs and cron schedulers.
    triggers: triggers::Triggers,
    /// Jobs' workers (see `jobs`).
    jobs: workload::Slots<jobs::JobSlot>,
    /// Services' workers and processes (see `services`).
    services: workload::Slots<Slot>,
    /// The sandbox of every user process (`--isolation strict`), or `None`.
    sandbox: Option<Arc<sandbox::Sandbox>>,
    /// Python zygotes per namespace (see `zygote`).
    zygotes: zygote::Zygotes,
    /// Warm Node processes per namespace and memory size (see `warm`).
    warm: warm::WarmPool,
    /// Unsandboxed: the unix sockets functions serve on (see `sockets`);
    /// `None` when sandboxed, or when they serve on loopback TCP.
    host_sockets: Option<Arc<sockets::HostSockets>>,
}

/// The local backend.
pub struct LocalBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("data_dir", &self.inner.opts.data_dir)
            .finish()
    }
}

/// `<data-dir>/run/<ns>/<name>.pid`: "PID PORT" of the serving process.
pub fn pid_file(data_dir: &Path, ns: &str, name: &str) -> PathBuf {
    data_dir.join("run").join(ns).join(format!("{name}.pid"))
}

impl LocalBackend {
    /// Opens the database under the data dir, reclaims anything a crash left
    /// behind, and brings every Ready function back. Must run inside a tokio
    /// runtime.
    pub async fn start(opts: LocalOptions) -> Result<LocalBackend> {
        let data_dir = opts.data_dir.clone();
        std::fs::create_dir_all(&data_dir).map_err(Error::io(format!(
            "creating data dir {}",
            data_dir.display()
        )))?;
        let data_dir = data_dir.canonicalize().map_err(Error::io(format!(
            "resolving data dir {}",
            data_dir.display()
        )))?;
        let mut opts = opts;
        opts.data_dir = data_dir.clone();
        let lock = lock_data_dir(&data_dir)?;
        let runtimes =
            runtimes::install(&data_dir).map_err(Error::io("installing the runtime servers"))?;
        let db = Arc::new(Db::open(&data_dir.join("state.db"))?);
        let sandbox = match opts.isolation {
            sandbox::Isolation::Strict => {
                let interpreters = sandbox::Interpreters {
                    python: opts.python.clone(),
                    node: opts.node.clone(),
                    npm: opts.npm.clone(),
                };
                let sb = sandbox::Sandbox::probe(&data_dir, &interpreters, opts.sandbox)
                    .map_err(|e| Error::Unsupported(format!("--isolation strict: {e}")))?;
                tracing::info!(
                    bwrap = %sb.bwrap().display(),
                    "isolation strict: every user process runs in a bubblewrap sandbox under its namespace's uid, with cgroup limits"
                );
                Some(Arc::new(sb))
            }
            sandbox::Isolation::None => {
                tracing::warn!("{}", ISOLATION_NONE_WARNING);
                None
            }
        };

        // Reclaim processes a crashed operator left behind.
        let pgids = db.recorded_processes()?;
        let marker = runtimes.dir.to_string_lossy().into_owned();
        let killed = process::reclaim_groups(&pgids, &data_dir, &marker);
        if !killed.is_empty() {
            tracing::warn!(
                ?killed,
                "killed processes left behind by a previous operator"
            );
        }
        db.clear_processes()?;
        let _ = std::fs::remove_dir_all(data_dir.join("run"));
        let host_sockets = match sandbox {
            None => {
                sockets::HostSockets::create(&data_dir.join("run").join("sockets")).map(Arc::new)
            }
            Some(_) => None,
        };
        for lang in ["python", "node"] {
            // deps/<lang>/<ns>/.tmp-*
            if let Ok(namespaces) = std::fs::read_dir(data_dir.join("deps").join(lang)) {
                for ns in namespaces.flatten() {
                    remove_tmp_dirs(&ns.path());
                }
            }
        }

        let store = CodeStore::new(data_dir.join("code"));
        let interrupted = store.remove_interrupted_writes();
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "removed partly written code uploads a previous operator left behind"
            );
        }

        let trigger_state = triggers::Triggers::open(db.clone(), &data_dir, opts.log_max_bytes)?;
        let inner = Arc::new(Inner {
            logs: Arc::new(Logs::new(data_dir.join("logs"), opts.log_max_bytes)),
            store,
            code_gc: Mutex::new(()),
            db,
            runtimes,
            opts,
            slots: Default::default(),
            next_generation: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            lock: Mutex::new(Some(lock)),
            triggers: trigger_state,
            jobs: Default::default(),
            services: Default::default(),
            sandbox,
            zygotes: Default::default(),
            warm: Default::default(),
            host_sockets,
        });
        if !inner.opts.warm_idle.is_zero() {
            tokio::spawn(coldstart::reap_idle_warm(Arc::downgrade(&inner)));
        }
        let mut restored = 0;
        for f in inner.db.all_functions()? {
            let plan = match f.status.phase {
                // Scaled-down or not, it waits for its first request.
                Phase::Ready if f.spec.min_instances == 0 => Plan::Idle,
                Phase::Ready => Plan::Restart,
                Phase::Building => Plan::Build,
                _ => continue,
            };
            let mut slots = inner.lock_slots();
            inner.schedule_locked(&mut slots, key(&f.namespace, &f.name), plan);
            restored += 1;
        }
        let cron_triggers = inner.triggers.restore(&inner).await?;
        let jobs_rerun = inner.restore_jobs()?;
        let services_restored = inner.restore_services()?;
        tracing::info!(jobs_rerun, services_restored, "jobs and services restored");
        tracing::info!(data_dir = %data_dir.display(), restored, cron_triggers, "local backend started");
        Ok(LocalBackend { inner })
    }

    /// The data dir (absolute).
    pub fn data_dir(&self) -> &Path {
        &self.inner.opts.data_dir
    }
}

/// Takes an exclusive lock on `<data-dir>/local.lock`, so that a second
/// operator on the same data dir refuses to start instead of killing the
/// first one's processes. The kernel releases it when the process dies.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let path = data_dir.join("local.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(Error::io(format!("opening {}", path.display())))?;
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(Error::Conflict(format!(
            "data dir {} is in use by another sless-operator (lock {} is held)",
            data_dir.display(),
            path.display()
        )));
    }
    Ok(file)
}

fn remove_tmp_dirs(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

impl Inner {
    fn lock_slots(&self) -> MutexGuard<'_, HashMap<Key, Slot>> {
        self.slots.lock()
    }

    /// Bumps the function's generation and replaces its worker.
    fn schedule_locked(self: &Arc<Self>, slots: &mut HashMap<Key, Slot>, key: Key, plan: Plan) {
        self.replace_worker(slots, key, move |inner, key, generation| async move {
            inner.work(key, generation, plan).await;
        });
    }

    /// The target of a function whose process serves now, from its slot
    /// (what [`Inner::function_target`] would answer first, without reading
    /// the function).
    fn serving_now(&self, ns: &str, name: &str) -> Option<InvokeTarget> {
        let slots = self.lock_slots();
        let slot = slots.get(&key(ns, name))?;
        slot.target(slot.timeout?, true)
    }

    /// Sets `status.instances` from the functions' slots: 1 while a process
    /// serves, else 0. Scaling up and down is not written to the database
    /// (a commit per cold start, under the slots' lock, would sit on the
    /// request's path); functions without a slot keep the stored value.
    fn with_live_instances(&self, functions: &mut [Function]) {
        let slots = self.lock_slots();
        for f in functions {
            if let Some(slot) = slots.get(&key(&f.namespace, &f.name)) {
                f.status.instances = u32::from(slot.active.is_some());
            }
        }
    }

    fn write_status(&self, key: &Key, f: impl FnOnce(&mut FunctionStatus)) -> bool {
        match self.db.get_function(&key.0, &key.1) {
            Ok(Some(mut func)) => {
                f(&mut func.status);
                match self.db.save_function(&func) {
                    Ok(saved) => saved,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot save function status");
                        false
                    }
                }
            }
            Ok(None) => false,
            Err(e) => {
                tracing::error!(error = %e, "cannot read function");
                false
            }
        }
    }

    fn launch_for(
        &self,
        f: &Function,
        built: &build::Built,
    ) -> std::result::Result<Launch, String> {
        let spec: &FunctionSpec = &f.spec;
        let mut env = self.base_env();
        let secrets = secrets::load(
            &self.opts.data_dir,
            &f.namespace,
            &f.name,
            &spec.secret_env_vars,
        )
        .map_err(|e| e.to_string())?;
        for (k, v) in spec.env_vars.iter().chain(&secrets) {
            if k == "PYTHONPATH" && built.python_deps.is_some() {
                continue;
            }
            env.push((k.clone(), v.clone()));
        }
        if let Some(deps) = &built.python_deps {
            let mut pp = deps.to_string_lossy().into_owned();
            if let Some(user) = spec.env_vars.get("PYTHONPATH") {
                pp = format!("{pp}:{user}");
            }
            env.push(("PYTHONPATH".into(), pp));
        }
        let src = built.src.to_string_lossy().into_owned();
        env.extend([
            ("SLESS_ENTRYPOINT".to_string(), spec.entrypoint.clone()),
            ("SLESS_FUNCTION".to_string(), f.name.clone()),
            ("SLESS_NAMESPACE".to_string(), f.namespace.clone()),
            ("SLESS_CODE_DIR".to_string(), src),
            ("SLESS_HOST".to_string(), "127.0.0.1".to_string()),
            ("SLESS_PORT".to_string(), "0".to_string()),
            (
                "SLESS_TIMEOUT_SEC".to_string(),
                spec.timeout_sec.to_string(),
            ),
            ("SLESS_MEMORY_MB".to_string(), spec.memory_mb.to_string()),
        ]);
        if self.sandbox.is_some() {
            env.push((
                "SLESS_SOCKET".to_string(),
                sandbox::SOCKET_INSIDE.to_string(),
            ));
        }
        let language = spec.runtime.language();
        let server: OsString = self
            .runtimes
            .server_for(language)
            .as_os_str()
            .to_os_string();
        let (program, args) = match language {
            Language::Python => (self.opts.python.clone(), vec![OsString::from("-u"), server]),
            Language::Node => (
                self.opts.node.clone(),
                vec![
                    OsString::from(format!(
                        "--max-old-space-size={}",
                        node_heap_mb(spec.memory_mb)
                    )),
                    server,
                ],
            ),
        };
        let sandbox = match &self.sandbox {
            Some(sb) => Some(self.sandbox_launch(sb, &f.namespace, spec.memory_mb, built)?),
            None => None,
        };
        Ok(Launch {
            program,
            args,
            cwd: built.src.clone(),
            env,
            ready_timeout: self.opts.ready_timeout,
            ready: supervisor::Readiness::Line,
            memory_mb: spec.memory_mb,
            timeout: Duration::from_secs(u64::from(spec.timeout_sec)),
            ns: f.namespace.clone(),
            name: f.name.clone(),
            sandbox,
            control_fd: None,
            stdin_pipe: false,
            socket: self.host_sockets.clone(),
        })
    }

    /// `PATH`, `HOME` and `LANG` of every user process: inside the sandbox
    /// its `PATH` and its private `/tmp` as `HOME`, else the operator's.
    pub(super) fn base_env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = match &self.sandbox {
            Some(sb) => vec![
                ("PATH".to_string(), sb.path_env().to_string()),
                ("HOME".to_string(), "/tmp".to_string()),
            ],
            None => ["PATH", "HOME"]
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
        };
        env.extend(std::env::var("LANG").ok().map(|v| ("LANG".to_string(), v)));
        env
    }

    /// The sandbox of a process of namespace `ns` running `built`: its own
    /// code, its dependencies and the runtime servers read-only, its own
    /// network namespace, serving on the sandbox's socket.
    fn sandbox_launch(
        &self,
        sb: &Arc<sandbox::Sandbox>,
        ns: &str,
        memory_mb: u32,
        built: &build::Built,
    ) -> std::result::Result<supervisor::SandboxLaunch, String> {
        let mut ro = vec![built.src.clone(), self.runtimes.dir.clone()];
        ro.extend(built.python_deps.clone());
        // The node_modules link points into the dependency cache.
        if let Ok(target) = std::fs::read_link(built.src.join("node_modules")) {
            ro.push(target);
        }
        self.serving_sandbox(sb, ns, ro, built.src.clone(), memory_mb)
    }

    /// A sandbox of namespace `ns` that serves on its socket: `ro` bound
    /// read-only, its own network namespace, the limits of a process of
    /// `memory_mb`.
    pub(super) fn serving_sandbox(
        &self,
        sb: &Arc<sandbox::Sandbox>,
        ns: &str,
        ro: Vec<PathBuf>,
        cwd: PathBuf,
        memory_mb: u32,
    ) -> std::result::Result<supervisor::SandboxLaunch, String> {
        Ok(supervisor::SandboxLaunch {
            sandbox: sb.clone(),
            plan: sandbox::Plan {
                uid: self.sandbox_uid(ns)?,
                ro,
                rw: Vec::new(),
                network: sandbox::Network::Isolated,
                socket_dir: None,
                bridge_port: None,
                cwd,
                limits: cgroup::Limits {
                    memory_mb,
                    pids_max: sb.settings.pids_max,
                    cpu_millis: sb.settings.cpu_millis,
                },
                tmp_mb: sb.settings.tmp_mb,
            },
            serves: true,
        })
    }

    /// The uid (and gid) user processes of namespace `ns` run as.
    pub(super) fn sandbox_uid(&self, ns: &str) -> std::result::Result<u32, String> {
        self.db
            .sandbox_index(ns)
            .map(sandbox::uid_for_index)
            .map_err(|e| format!("cannot allocate the sandbox uid of namespace {ns}: {e}"))
    }

    /// Removes build dirs of other code versions of this function.
    fn prune_builds(&self, key: &Key, keep_sha: &str) {
        let dir = self.opts.data_dir.join("builds").join(&key.0).join(&key.1);
        let keep = build::short_sha(keep_sha);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy() != keep {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }

    /// The worker of one generation: build if needed, start, switch, supervise.
    async fn work(self: Arc<Self>, key: Key, generation: u64, plan: Plan) {
        let Ok(Some(f)) = self.db.get_function(&key.0, &key.1) else {
            return;
        };
        let Some(sha) = f.status.code_sha256.clone() else {
            return;
        };
        let runtime = f.spec.runtime;
        let existing = match plan {
            Plan::Restart | Plan::Idle => {
                build::load_built(&self.opts.data_dir, &key.0, &key.1, &sha, runtime)
            }
            Plan::Build => None,
        };
        let start_at_zero = plan == Plan::Idle && existing.is_some();
        let built_now = existing.is_none();
        let built = match existing {
            Some(b) => b,
            None => {
                self.set_status::<Function>(&key, generation, |s| {
                    s.phase = Phase::Building;
                    s.message = Some(format!(
                        "building code {} for {runtime}",
                        build::short_sha(&sha)
                    ));
                });
                match self.build_now(&key.0, &key.1, &sha, runtime).await {
                    Ok(b) => b,
                    Err(msg) => {
                        let msg = format!("build failed: {msg}");
                        return self.fail::<Function>(&key, generation, msg).await;
                    }
                }
            }
        };

        // Start with the spec as it is now.
        let Ok(Some(f)) = self.db.get_function(&key.0, &key.1) else {
            return;
        };
        let launch = match self.launch_for(&f, &built) {
            Ok(l) => l,
            Err(msg) => return self.fail::<Function>(&key, generation, msg).await,
        };
        let scale = match self.lock_slots().get_mut(&key) {
            Some(slot) if slot.generation == generation => {
                slot.timeout = Some(timeout_of(&f.spec));
                slot.scale.clone()
            }
            _ => return,
        };
        scale.configure(f.spec.min_instances, f.spec.idle_timeout_sec);
        let sink = self.run_sink::<Function>(&key);
        let mut first = None;
        if start_at_zero {
            let mut slots = self.lock_slots();
            match slots.get_mut(&key) {
                Some(slot) if slot.generation == generation => slot.at_zero = true,
                _ => return,
            }
            // (`status.instances` reads 0 from the slot: nothing to write.)
            drop(slots);
            self.prewarm(&key.0, runtime, f.spec.memory_mb);
        } else {
            self.build_log::<Function>(
                &key,
                &format!(
                    "starting {} (entrypoint {}) in {}",
                    runtime,
                    f.spec.entrypoint,
                    built.src.display()
                ),
            );
            let proc = match supervisor::start(&launch, &self.db, sink.clone()).await {
                Ok(p) => p,
                Err(msg) => {
                    let msg = format!("entrypoint {:?} failed to start: {msg}", f.spec.entrypoint);
                    return self.fail::<Function>(&key, generation, msg).await;
                }
            };
            let image_ref = format!("local/{}/{}:{}", key.0, key.1, build::short_sha(&sha));
            let Some(old) = self.go_live::<Function>(&key, generation, &proc, |s| {
                s.phase = Phase::Ready;
                s.message = None;
                s.instances = 1;
                s.image_ref = Some(image_ref);
                if built_now || s.last_built_at.is_none() {
                    s.last_built_at = Some(now_rfc3339());
                }
            }) else {
                return; // dropping `proc` kills it
            };
            self.build_log::<Function>(
                &key,
                &format!("ready: pid {} serving on {}", proc.pid, proc.endpoint()),
            );
            self.retire(old).await;
            self.prune_builds(&key, &sha);
            first = Some(proc);
        }
        let (inner, k, launch) = (&*self, &key, &launch);
        let restart = || {
            let sink = sink.clone();
            async move {
                // A spec change would have started a newer generation; a
                // deleted function has no row.
                if !matches!(inner.db.get_function(&k.0, &k.1), Ok(Some(_))) {
                    return None;
                }
                Some(supervisor::start(launch, &inner.db, sink).await)
            }
        };
        loop {
            let proc = match first.take() {
                Some(p) => p,
                None => match self
                    .cold_start(&key, generation, launch, &sink, &scale)
                    .await
                {
                    Some(p) => p,
                    None => return,
                },
            };
            let ended = self
                .supervise::<Function, _>(&key, generation, proc, &restart, Some(&scale))
                .await;
            match ended {
                Ended::Gone => return,
                Ended::Idle(proc) => {
                    sink(&format!(
                        "sless: no request for {} s; stopping the process (scaled to zero; the next request starts it)",
                        f.spec.idle_timeout_sec
                    ));
                    proc.stop(self.opts.stop_grace).await;
                    if let Some(slot) = self.lock_slots().get_mut(&key) {
                        slot.stopping = None;
                    }
                    self.prewarm(&key.0, runtime, f.spec.memory_mb);
                }
            }
        }
    }

    fn not_found(ns: &str, name: &str) -> Error {
        Error::function_not_found(ns, name)
    }

    fn get(&self, ns: &str, name: &str) -> Result<Function> {
        self.db
            .get_function(ns, name)?
            .ok_or_else(|| Self::not_found(ns, name))
    }
}

impl Served for Function {
    const NOUN: &'static str = "function";
    type Status = FunctionStatus;

    fn slots(inner: &Inner) -> &workload::Slots<Slot> {
        &inner.slots
    }

    fn id(name: &str) -> String {
        name.to_string()
    }

    fn write_status(inner: &Inner, k: &Key, f: impl FnOnce(&mut FunctionStatus)) -> bool {
        inner.write_status(k, f)
    }

    fn failed(s: &mut FunctionStatus, message: String) {
        s.phase = Phase::Failed;
        s.message = Some(message);
        s.instances = 0;
    }

    fn exited(s: &mut FunctionStatus, how: &str, delay: Duration) -> u32 {
        s.instances = 0;
        s.restarts += 1;
        s.message = Some(format!(
            "the process {how}; restarting in {} ms (restart {})",
            delay.as_millis(),
            s.restarts
        ));
        s.restarts
    }

    fn restarted(s: &mut FunctionStatus, how: &str, restarts: u32) {
        s.instances = 1;
        s.message = Some(format!(
            "restarted after the process {how} (restart {restarts})"
        ));
    }

    fn retrying(s: &mut FunctionStatus, msg: &str, delay: Duration, _restarts: u32) {
        s.message = Some(format!(
            "restart failed, retrying in {} ms: {msg}",
            delay.as_millis()
        ));
    }
}

#[async_trait::async_trait]
impl Backend for LocalBackend {
    async fn ensure_namespace(&self, namespace: &str) -> Result<NamespaceInfo> {
        let created = self.inner.db.ensure_namespace(namespace)?;
        Ok(NamespaceInfo {
            namespace: namespace.to_string(),
            created,
        })
    }

    async fn create_function(
        &self,
        namespace: &str,
        name: &str,
        spec: FunctionSpec,
    ) -> Result<Function> {
        if !self.inner.db.namespace_exists(namespace)? {
            return Err(Error::NotFound {
                kind: "namespace",
                namespace: namespace.to_string(),
                name: namespace.to_string(),
            });
        }
        let now = now_rfc3339();
        let f = Function {
            namespace: namespace.to_string(),
            name: name.to_string(),
            spec,
            status: FunctionStatus {
                phase: Phase::Pending,
                message: Some("waiting for a code upload".into()),
                code_sha256: None,
                source_hash: None,
                image_ref: None,
                last_built_at: None,
                invoke_path: paths::function_invoke(namespace, name),
                restarts: 0,
                instances: 0,
            },
            created_at: now.clone(),
            updated_at: now,
        };
        {
            // Under the slots' lock: ordered with a delete's clean-up.
            let _slots = self.inner.lock_slots();
            self.inner.db.insert_function(&f)?;
            self.inner.logs.revive(namespace, name);
            if let Err(e) = self
                .inner
                .store_secrets(namespace, name, &f.spec.secret_env_vars)
            {
                let _ = self.inner.db.delete_function(namespace, name);
                return Err(e);
            }
        }
        Ok(f)
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<Function> {
        let mut f = self.inner.get(namespace, name)?;
        self.inner.with_live_instances(std::slice::from_mut(&mut f));
        Ok(f)
    }

    async fn list_functions(&self, namespace: &str) -> Result<Vec<Function>> {
        let mut all = self.inner.db.list_functions(namespace)?;
        self.inner.with_live_instances(&mut all);
        Ok(all)
    }

    async fn update_function(
        &self,
        namespace: &str,
        name: &str,
        update: UpdateFunction,
    ) -> Result<Function> {
        let inner = &self.inner;
        let mut slots = inner.lock_slots();
        let mut f = inner.get(namespace, name)?;
        let next = update.apply_to(&f.spec)?;
        if next == f.spec {
            return Ok(f);
        }
        let new_runtime = (next.runtime != f.spec.runtime).then_some(next.runtime);
        let restart = !next.same_process_as(&f.spec);
        inner.store_secrets(namespace, name, &next.secret_env_vars)?;
        if let Some(slot) = slots.get_mut(&key(namespace, name)) {
            slot.timeout = Some(timeout_of(&next));
            slot.scale
                .configure(next.min_instances, next.idle_timeout_sec);
            if !restart && next.min_instances > 0 && slot.at_zero {
                // Up to one instance now: start it without waiting for a request.
                slot.wanted = true;
                slot.scale.wake();
            }
        }
        f.spec = next;
        f.updated_at = now_rfc3339();
        let s = &mut f.status;
        let code = s.code_sha256.as_deref();
        let plan = Plan::for_update(code, new_runtime, restart, &mut s.phase, &mut s.message);
        inner.db.save_function(&f)?;
        if let Some(plan) = plan {
            inner.schedule_locked(&mut slots, key(namespace, name), plan);
        }
        Ok(f)
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        let inner = &self.inner;
        let (slot, sha) = {
            let mut slots = inner.lock_slots();
            let f = inner.get(namespace, name)?;
            inner.db.delete_function(namespace, name)?;
            (slots.remove(&key(namespace, name)), f.status.code_sha256)
        };
        if let Some(slot) = slot {
            if let Some(w) = slot.worker {
                w.abort();
            }
            for p in [slot.active, slot.stopping].into_iter().flatten() {
                p.stop(inner.opts.stop_grace).await;
            }
        }
        {
            let _slots = inner.lock_slots();
            // Created again while the old processes stopped: the new one
            // owns the name's dirs now.
            if inner.db.get_function(namespace, name)?.is_none() {
                inner.remove_traces(namespace, name);
                inner.logs.remove_for_good(namespace, name);
            }
        }
        inner.release_code(sha.as_deref());
        Ok(())
    }

    async fn upload_code(&self, namespace: &str, name: &str, code: CodeBundle) -> Result<Function> {
        let inner = &self.inner;
        let existing = inner.get(namespace, name)?;
        if existing.status.code_sha256.as_deref() == Some(code.sha256.as_str())
            && matches!(existing.status.phase, Phase::Ready | Phase::Building)
        {
            return Ok(existing);
        }
        inner.store_code(&code).await?;
        let (f, old_sha) = {
            let mut slots = inner.lock_slots();
            // Deleted meanwhile: the zip just stored is nobody's.
            let mut f = inner
                .get(namespace, name)
                .inspect_err(|_| inner.release_code(Some(&code.sha256)))?;
            if f.status.code_sha256.as_deref() == Some(code.sha256.as_str())
                && matches!(f.status.phase, Phase::Ready | Phase::Building)
            {
                return Ok(f);
            }
            let old_sha = f.status.code_sha256.replace(code.sha256.clone());
            f.status.source_hash = code.source_hash.clone();
            f.status.phase = Phase::Building;
            f.status.message = Some(format!("building code {}", build::short_sha(&code.sha256)));
            f.status.restarts = 0;
            f.updated_at = now_rfc3339();
            inner
                .db
                .save_function(&f)
                .inspect_err(|_| inner.release_code(Some(&code.sha256)))?;
            inner.keep_stored(&code);
            inner.schedule_locked(&mut slots, key(namespace, name), Plan::Build);
            (f, old_sha)
        };
        if old_sha.as_deref() != Some(code.sha256.as_str()) {
            inner.release_code(old_sha.as_deref());
        }
        Ok(f)
    }

    async fn read_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        self.inner.get(namespace, name)?;
        self.inner.read_log(namespace, name, kind, tail).await
    }

    async fn invoke_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        // A serving function's target comes from its slot alone (no database
        // read on the hot path); anything else (at zero, starting, failed,
        // missing) takes the full path.
        if let Some(t) = self.inner.serving_now(namespace, name) {
            return Ok(t);
        }
        let f = self.inner.get(namespace, name)?;
        self.inner.function_target(&f).await
    }

    async fn create_trigger(
        &self,
        namespace: &str,
        name: &str,
        spec: TriggerSpec,
    ) -> Result<Trigger> {
        let inner = &self.inner;
        inner.triggers.create(inner, namespace, name, spec).await
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<Trigger> {
        self.inner.triggers.get(&self.inner, namespace, name)
    }

    async fn trigger_spec(&self, namespace: &str, name: &str) -> Result<Arc<TriggerSpec>> {
        self.inner.triggers.spec(namespace, name)
    }

    async fn list_triggers(&self, namespace: &str) -> Result<Vec<Trigger>> {
        self.inner.triggers.list(&self.inner, namespace)
    }

    async fn update_trigger(
        &self,
        namespace: &str,
        name: &str,
        update: UpdateTrigger,
    ) -> Result<Trigger> {
        let inner = &self.inner;
        inner.triggers.update(inner, namespace, name, update).await
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.inner.triggers.delete(namespace, name).await
    }

    async fn read_trigger_logs(
        &self,
        namespace: &str,
        name: &str,
        tail: Option<usize>,
    ) -> Result<String> {
        self.inner.triggers.read_logs(namespace, name, tail).await
    }

    async fn create_job(&self, namespace: &str, name: &str, spec: JobSpec) -> Result<Job> {
        self.job_create(namespace, name, spec)
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<Job> {
        self.inner.db.object(namespace, name)
    }

    async fn list_jobs(&self, namespace: &str) -> Result<Vec<Job>> {
        self.inner.db.list_objects(Some(namespace))
    }

    async fn update_job(&self, namespace: &str, name: &str, update: UpdateJob) -> Result<Job> {
        self.job_update(namespace, name, update)
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.job_delete(namespace, name).await
    }

    async fn upload_job_code(&self, namespace: &str, name: &str, code: CodeBundle) -> Result<Job> {
        self.job_upload(namespace, name, code).await
    }

    async fn read_job_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        self.inner.db.object::<Job>(namespace, name)?;
        let id = jobs::job_id(name);
        self.inner.read_log(namespace, &id, kind, tail).await
    }

    async fn create_service(&self, ns: &str, name: &str, spec: ServiceSpec) -> Result<Service> {
        self.service_create(ns, name, spec)
    }

    async fn get_service(&self, namespace: &str, name: &str) -> Result<Service> {
        self.inner.db.object(namespace, name)
    }

    async fn list_services(&self, namespace: &str) -> Result<Vec<Service>> {
        self.inner.db.list_objects(Some(namespace))
    }

    async fn update_service(&self, ns: &str, name: &str, update: UpdateService) -> Result<Service> {
        self.service_update(ns, name, update)
    }

    async fn delete_service(&self, namespace: &str, name: &str) -> Result<()> {
        self.service_delete(namespace, name).await
    }

    async fn upload_service_code(&self, ns: &str, name: &str, code: CodeBundle) -> Result<Service> {
        self.service_upload(ns, name, code).await
    }

    async fn read_service_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        self.inner.db.object::<Service>(namespace, name)?;
        let id = services::svc_id(name);
        self.inner.read_log(namespace, &id, kind, tail).await
    }

    async fn service_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        self.service_target_of(namespace, name).await
    }

    fn health_warnings(&self) -> Vec<String> {
        if self.inner.sandbox.is_some() {
            Vec::new()
        } else {
            vec![ISOLATION_NONE_WARNING.to_string()]
        }
    }

    async fn shutdown(&self) {
        let inner = &self.inner;
        inner.shutting_down.store(true, Ordering::SeqCst);
        inner.triggers.shutdown().await;
        let slots: Vec<Slot> = inner.lock_slots().drain().map(|(_, s)| s).collect();
        let mut procs = Vec::new();
        for slot in slots {
            if let Some(w) = slot.worker {
                w.abort();
            }
            procs.extend(slot.active);
            procs.extend(slot.stopping);
        }
        let grace = inner.opts.stop_grace;
        futures_util::future::join_all(procs.iter().map(|p| p.stop(grace))).await;
        inner.stop_jobs().await;
        inner.stop_services().await;
        inner.zygotes.stop_all(grace).await;
        inner.warm.clear();
        let _ = std::fs::remove_dir_all(inner.opts.data_dir.join("run"));
        // Another backend may now open this data dir.
        inner.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        tracing::info!(stopped = procs.len(), "local backend stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(code: bool, new_runtime: bool, restart: bool) -> (Option<Plan>, Phase, Option<String>) {
        let (mut phase, mut message) = (Phase::Ready, None);
        let code = code.then_some("abc");
        let rt = new_runtime.then_some(Runtime::Python311);
        let p = Plan::for_update(code, rt, restart, &mut phase, &mut message);
        (p, phase, message)
    }

    #[test]
    fn an_update_rebuilds_for_a_new_runtime_restarts_or_does_nothing() {
        assert_eq!(plan(false, true, true), (None, Phase::Ready, None));
        let (p, phase, message) = plan(true, true, false);
        assert_eq!((p, phase), (Some(Plan::Build), Phase::Building));
        assert!(message.unwrap().starts_with("rebuilding for runtime "));
        let (p, phase, message) = plan(true, false, true);
        assert_eq!((p, phase), (Some(Plan::Restart), Phase::Building));
        assert_eq!(message.unwrap(), "restarting with the updated spec");
        assert_eq!(plan(true, false, false), (None, Phase::Ready, None));
    }
}
