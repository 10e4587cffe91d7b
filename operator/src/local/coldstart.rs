//! Cold starts on the local backend: what a function at zero starts from.
//! A request for it wakes its worker ([`Inner::function_target`]), which
//! starts one process ([`Inner::cold_start`]): forked from the namespace's
//! Python zygote (`zygote`), taken from the warm Node processes (`warm`),
//! or started fresh. See docs/local-backend.md, "Scale to zero".

use super::supervisor::{self, Launch};
use super::{Inner, Key, ZYGOTE_MEMORY_MB, key, node_heap_mb, scale, warm, workload, zygote};
use crate::backend::InvokeTarget;
use crate::{Error, Result};
use sless_wire::runtime::Language;
use sless_wire::{Function, Phase, Runtime};
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Inner {
    /// The sandbox (strict) of a pre-started process of namespace `ns` for
    /// `language`: it sees the namespace's builds and dependency caches of
    /// that language and the runtime servers read-only (created when
    /// missing), with the limits of a process of `memory_mb`.
    fn namespace_sandbox(
        &self,
        ns: &str,
        language: Language,
        memory_mb: u32,
    ) -> std::result::Result<Option<supervisor::SandboxLaunch>, String> {
        let Some(sb) = &self.sandbox else {
            return Ok(None);
        };
        let lang = match language {
            Language::Python => "python",
            Language::Node => "node",
        };
        let builds = self.opts.data_dir.join("builds").join(ns);
        let deps = self.opts.data_dir.join("deps").join(lang).join(ns);
        for dir in [&builds, &deps] {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let ro = vec![builds, deps, self.runtimes.dir.clone()];
        self.serving_sandbox(sb, ns, ro, self.runtimes.dir.clone(), memory_mb)
            .map(Some)
    }

    /// The launch of namespace `ns`'s Python zygote: `python3 -u zygote.py 4`
    /// in a sandbox of that namespace that sees its builds and dependency
    /// caches read-only (the forked functions' code) and serves from its
    /// socket dir (the forked functions' sockets).
    fn zygote_launch(&self, ns: &str) -> std::result::Result<Launch, String> {
        let memory_mb = ZYGOTE_MEMORY_MB;
        let sandbox = self.namespace_sandbox(ns, Language::Python, memory_mb)?;
        Ok(Launch {
            program: self.opts.python.clone(),
            args: vec![
                OsString::from("-u"),
                self.runtimes.zygote_py.as_os_str().to_os_string(),
                OsString::from(supervisor::CONTROL_FD.to_string()),
            ],
            cwd: self.runtimes.dir.clone(),
            env: self.base_env(),
            ready_timeout: self.opts.ready_timeout,
            memory_mb,
            timeout: Duration::from_secs(30),
            ns: ns.to_string(),
            name: "zygote".to_string(),
            ready: supervisor::Readiness::Line,
            sandbox,
            control_fd: None,
            stdin_pipe: false,
            // Its children get theirs when forked.
            socket: None,
        })
    }

    /// Namespace `ns`'s running zygote, started when it has none.
    async fn zygote(&self, ns: &str) -> std::result::Result<Arc<zygote::Zygote>, String> {
        self.zygotes
            .get_or_start(ns, async {
                let launch = self.zygote_launch(ns)?;
                // Its own output (a traceback when it cannot start) goes to
                // the operator's log; its children's goes to their run logs.
                let ns_owned = ns.to_string();
                let sink: supervisor::LineSink = Arc::new(move |line: &str| {
                    tracing::warn!(namespace = %ns_owned, "python zygote: {line}");
                });
                zygote::Zygote::start(launch, &self.db, sink).await
            })
            .await
    }

    /// Gets the next cold start of a function of `ns` ready (one of them
    /// just went to zero): the namespace's Python zygote, started in the
    /// background, or a warm Node process for `memory_mb`.
    pub(super) fn prewarm(self: &Arc<Self>, ns: &str, runtime: Runtime, memory_mb: u32) {
        if !self.opts.zygote || self.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        match runtime.language() {
            Language::Python => {
                let (inner, ns) = (self.clone(), ns.to_string());
                tokio::spawn(async move {
                    if let Err(e) = inner.zygote(&ns).await {
                        tracing::warn!(namespace = %ns, error = %e, "cannot start the Python zygote");
                    }
                });
            }
            Language::Node => self.prewarm_node(ns, memory_mb),
        }
    }

    /// Starts a warm Node process for (`ns`, `memory_mb`) unless one waits.
    fn prewarm_node(&self, ns: &str, memory_mb: u32) {
        if !self.warm.wants(ns, memory_mb) || self.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let started = self.node_warm_launch(ns, memory_mb).and_then(|launch| {
            let ns_owned = ns.to_string();
            let (switch, sink) = warm::switchable(Arc::new(move |line: &str| {
                tracing::warn!(namespace = %ns_owned, "warm node process: {line}");
            }));
            supervisor::spawn(&launch, &self.db, sink).map(|spawned| warm::Member {
                spawned,
                sink: switch,
            })
        });
        match started {
            Ok(m) => self.warm.put(ns, memory_mb, m),
            Err(e) => {
                tracing::warn!(namespace = %ns, error = %e, "cannot start a warm Node process")
            }
        }
    }

    /// The launch of a warm Node process of namespace `ns` for functions of
    /// `memory_mb`: `node --max-old-space-size=… server.js --warm` in a
    /// sandbox of that namespace that sees its builds and Node dependency
    /// caches read-only, with the limits of such a function.
    fn node_warm_launch(&self, ns: &str, memory_mb: u32) -> std::result::Result<Launch, String> {
        let sandbox = self.namespace_sandbox(ns, Language::Node, memory_mb)?;
        Ok(Launch {
            program: self.opts.node.clone(),
            args: vec![
                OsString::from(format!("--max-old-space-size={}", node_heap_mb(memory_mb))),
                self.runtimes.node.as_os_str().to_os_string(),
                OsString::from("--warm"),
            ],
            cwd: self.runtimes.dir.clone(),
            env: self.base_env(),
            ready_timeout: self.opts.ready_timeout,
            memory_mb,
            timeout: Duration::from_secs(30),
            ns: ns.to_string(),
            name: "node-warm".to_string(),
            ready: supervisor::Readiness::Line,
            sandbox,
            control_fd: None,
            stdin_pipe: true,
            // Its function's socket comes with its environment.
            socket: None,
        })
    }

    /// Starts the process of a cold start: forked from the namespace's
    /// zygote for Python (when enabled and working), else a fresh start.
    async fn start_cold(
        &self,
        ns: &str,
        launch: &Launch,
        sink: &supervisor::LineSink,
    ) -> std::result::Result<Arc<supervisor::Proc>, String> {
        let runs = |server: &Path| launch.args.iter().any(|a| a.as_os_str() == server);
        let fresh = needs_fresh_start(&launch.env, &self.base_env());
        if self.opts.zygote && runs(&self.runtimes.node) && !fresh {
            // The replacement starts once this start is done, so its boot
            // does not take the CPU this start is waiting for.
            let taken = self.warm.take(ns, launch.memory_mb);
            let started = match taken {
                Some(mut m) => {
                    m.route(sink.clone());
                    match m.spawned.assign(launch).await {
                        Ok(()) => Some(
                            m.spawned
                                .wait_ready(launch)
                                .await
                                .map(|port| m.spawned.into_proc(port, launch)),
                        ),
                        // It died while waiting: start fresh instead.
                        Err(e) => {
                            sink(&format!(
                                "sless: the warm process was gone ({e}); starting a fresh process"
                            ));
                            None
                        }
                    }
                }
                None => None,
            };
            let started = match started {
                Some(r) => r,
                None => supervisor::start(launch, &self.db, sink.clone()).await,
            };
            self.prewarm_node(ns, launch.memory_mb);
            return started;
        }
        if self.opts.zygote && runs(&self.runtimes.python) && !fresh {
            let forked = match self.zygote(ns).await {
                Ok(z) => z.fork(launch, self.sandbox.as_deref(), sink.clone()).await,
                Err(e) => Err(e),
            };
            match forked {
                Ok(mut spawned) => {
                    let port = spawned.wait_ready(launch).await?;
                    return Ok(spawned.into_proc(port, launch));
                }
                Err(e) => sink(&format!(
                    "sless: the zygote could not fork ({e}); starting a fresh process"
                )),
            }
        }
        supervisor::start(launch, &self.db, sink.clone()).await
    }

    /// At zero: waits for a request (or `min_instances = 1`) and starts the
    /// process, telling the waiting requests when it is live or failed.
    /// `None` when the generation is no longer current.
    pub(super) async fn cold_start(
        &self,
        key: &Key,
        generation: u64,
        launch: &Launch,
        sink: &supervisor::LineSink,
        scale: &scale::Scale,
    ) -> Option<Arc<supervisor::Proc>> {
        let mut backoff = supervisor::Backoff::default();
        let mut failed = false;
        loop {
            if scale.keeps_one() {
                // min_instances = 1: start without a request (after a failed
                // start, with backoff).
                if failed {
                    tokio::time::sleep(backoff.delay(Duration::ZERO)).await;
                }
            } else {
                scale.woken().await;
            }
            {
                let mut slots = self.lock_slots();
                let slot = slots.get_mut(key).filter(|s| s.generation == generation)?;
                if !slot.wanted && !scale.keeps_one() {
                    continue; // a wake-up left over from an earlier start
                }
                slot.cold_error = None;
            }
            let t0 = std::time::Instant::now();
            let started = self.start_cold(&key.0, launch, sink).await;
            let took = t0.elapsed();
            let mut slots = self.lock_slots();
            let slot = slots.get_mut(key).filter(|s| s.generation == generation)?;
            slot.wanted = false;
            match started {
                Ok(p) => {
                    slot.active = Some(p.clone());
                    slot.at_zero = false;
                    scale.touch();
                    // The pid file before anyone is answered by the process.
                    // `instances` is read from the slot (see
                    // `Inner::with_live_instances`): no database write on
                    // the way, except to clear a failed start's message.
                    self.write_pid_file::<Function>(key, &p);
                    if failed {
                        self.write_status(key, |s| s.message = None);
                    }
                    drop(slots);
                    scale.announce();
                    sink(&format!(
                        "sless: cold start: pid {} ready in {} ms",
                        p.pid,
                        took.as_millis()
                    ));
                    return Some(p);
                }
                Err(msg) => {
                    failed = true;
                    slot.cold_error = Some(msg.clone());
                    self.write_status(key, |s| {
                        s.message = Some(format!("the last cold start failed: {msg}"));
                    });
                    drop(slots);
                    scale.announce();
                    sink(&format!("sless: cold start failed: {msg}"));
                }
            }
        }
    }

    /// Where a request for `f` goes: its live process; for a function at
    /// zero, the process the request's wake-up starts (the request is held
    /// until it is ready, within `timeout_sec`); for one restarting its
    /// process, the restarted process (held up to [`workload::RESTART_HOLD`]).
    pub(super) async fn function_target(&self, f: &Function) -> Result<InvokeTarget> {
        let k = key(&f.namespace, &f.name);
        let timeout = Duration::from_secs(u64::from(f.spec.timeout_sec));
        let not_serving =
            || workload::not_serving::<Function>(&k, f.status.phase, f.status.message.clone());
        let (changed, hold, restarting) = {
            let mut slots = self.lock_slots();
            let Some(slot) = slots.get_mut(&k) else {
                return Err(not_serving());
            };
            if let Some(t) = slot.target(timeout, true) {
                return Ok(t);
            }
            if f.status.phase != Phase::Ready {
                return Err(not_serving());
            }
            if slot.at_zero {
                // At zero: this request wakes the worker for a cold start.
                slot.wanted = true;
                let rx = slot.scale.subscribe();
                slot.scale.wake();
                (rx, timeout, false)
            } else if slot.worker.is_some() {
                // Up, but its process exited (or has not started since an
                // operator restart or an update): the worker starts one by
                // itself. Hold the request for it, for a bounded time, so a
                // crash costs the requests in flight and not every request
                // of the next half second.
                (
                    slot.scale.subscribe(),
                    timeout.min(workload::RESTART_HOLD),
                    true,
                )
            } else {
                return Err(not_serving());
            }
        };
        let gone = || Self::not_found(&k.0, &f.name);
        match self
            .held_target::<Function>(&k, changed, timeout, hold, true, gone)
            .await
        {
            Some(answer) => answer,
            None if restarting => Err(workload::restart_timed_out::<Function>(
                &k,
                hold,
                f.status.message.clone(),
            )),
            None => Err(Error::NotReady(format!(
                "function {:?} did not start within its timeout_sec ({} s)",
                f.name, f.spec.timeout_sec
            ))),
        }
    }
}

/// Stops zygotes and warm Node processes idle for the backend's
/// `warm_idle` (checked a few times per period) until the backend is gone
/// or shutting down.
pub(super) async fn reap_idle_warm(inner: std::sync::Weak<Inner>) {
    let every = match inner.upgrade() {
        Some(i) => {
            (i.opts.warm_idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
        }
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let Some(cutoff) = std::time::Instant::now().checked_sub(inner.opts.warm_idle) else {
            continue;
        };
        let nodes = inner.warm.expire(cutoff);
        let zygotes = inner.zygotes.stop_idle(cutoff, inner.opts.stop_grace).await;
        if nodes + zygotes > 0 {
            tracing::info!(
                zygotes,
                warm_node = nodes,
                idle_sec = inner.opts.warm_idle.as_secs(),
                "stopped idle warm processes"
            );
        }
    }
}

/// True when `env` sets a variable that is read only when an interpreter,
/// the C library, the dynamic loader or OpenSSL start, to a value the zygote
/// and warm processes (started with `base`) did not have: a process started
/// earlier would miss it, so such a function starts fresh. `PYTHONPATH` and
/// `NODE_PATH` the runtimes apply themselves; `TZ` is re-read.
fn needs_fresh_start(env: &[(String, String)], base: &[(String, String)]) -> bool {
    const PREFIXES: [&str; 7] = [
        "PYTHON", "NODE_", "LD_", "LC_", "MALLOC_", "GLIBC_", "OPENSSL_",
    ];
    const APPLIED: [&str; 2] = ["PYTHONPATH", "NODE_PATH"];
    env.iter().any(|(k, v)| {
        let read_at_start = (PREFIXES.iter().any(|p| k.starts_with(p))
            && !APPLIED.contains(&k.as_str()))
            || matches!(k.as_str(), "LANG" | "LANGUAGE");
        read_at_start && !base.iter().any(|(bk, bv)| bk == k && bv == v)
    })
}

#[cfg(test)]
mod tests {
    use super::needs_fresh_start;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn start_up_variables_force_a_fresh_start() {
        let base = env(&[("PATH", "/usr/bin"), ("LANG", "C.UTF-8")]);
        let plain = env(&[
            ("PATH", "/usr/bin"),
            ("LANG", "C.UTF-8"),
            ("PYTHONPATH", "/d"),
            ("NODE_PATH", "/n"),
            ("TZ", "UTC"),
            ("GREETING", "hi"),
        ]);
        assert!(!needs_fresh_start(&plain, &base));
        for k in [
            "PYTHONHASHSEED",
            "NODE_OPTIONS",
            "NODE_EXTRA_CA_CERTS",
            "LD_PRELOAD",
            "LC_ALL",
            "MALLOC_ARENA_MAX",
            "OPENSSL_CONF",
        ] {
            assert!(needs_fresh_start(&env(&[(k, "1")]), &base), "{k}");
        }
        assert!(needs_fresh_start(&env(&[("LANG", "de_DE.UTF-8")]), &base));
    }
}
