//! Jobs in the local backend: build the code like a function (once per code
//! version), run the runtime server once (`--once INPUT OUTPUT`, see
//! docs/runtime-protocol.md) per generation, and record the return value.
//!
//! Every spec change and every new code upload bumps `generation` and
//! replaces the job's worker; a worker only writes status while its
//! generation is still the job's, so an old run can never overwrite a newer
//! one. Aborting a worker (newer generation, delete, shutdown) drops its
//! process handle, which kills the process group of a running pip/npm or run.

use super::db::now_rfc3339;
use super::supervisor;
use super::workload::{RunSpec, ident};
use super::{Inner, Key, key};
use crate::Result;
use crate::backend::CodeBundle;
use sless_wire::function::LogKind;
use sless_wire::job::JOB_RESULT_MAX_BYTES;
use sless_wire::{Job, JobPhase, JobSpec, JobStatus, UpdateJob};
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

/// Lines of output appended to a failed job's error.
const ERROR_TAIL_LINES: usize = 20;

/// A job's worker, if one runs, and the exit of its current run process.
#[derive(Default)]
pub struct JobSlot {
    worker: Option<tokio::task::JoinHandle<()>>,
    run_exit: Option<supervisor::ExitWatch>,
}

/// `job.<name>`: the job's identity for builds, logs and process records.
pub(super) fn job_id(name: &str) -> String {
    ident("job", name)
}

impl Inner {
    /// Replaces the job's worker with one for the job's current generation.
    fn schedule_job(self: &Arc<Self>, slots: &mut std::collections::HashMap<Key, JobSlot>, k: Key) {
        if self.shutting_down.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let slot = slots.entry(k.clone()).or_default();
        if let Some(w) = slot.worker.take() {
            w.abort();
        }
        let inner = self.clone();
        slot.worker = Some(tokio::spawn(async move { inner.run_job(k).await }));
    }

    /// Writes the job's status while `generation` is still its generation.
    fn job_status(&self, k: &Key, generation: u64, f: impl FnOnce(&mut JobStatus)) -> bool {
        let _slots = self.jobs.lock();
        self.db.modify_object::<Job>(&k.0, &k.1, |job| {
            job.generation == generation && {
                f(&mut job.status);
                true
            }
        })
    }

    fn fail_job(&self, k: &Key, generation: u64, error: String) {
        self.logs.append(
            &k.0,
            &job_id(&k.1),
            LogKind::Build,
            &format!("FAILED: {error}"),
        );
        self.job_status(k, generation, |s| {
            s.phase = JobPhase::Failed;
            s.message = None;
            s.error = Some(error);
            s.completed_at = Some(now_rfc3339());
        });
    }

    /// Builds (when needed) and runs the job's current generation once.
    async fn run_job(self: Arc<Self>, k: Key) {
        let Ok(Some(job)) = self.db.get_object::<Job>(&k.0, &k.1) else {
            return;
        };
        let Some(sha) = job.status.code_sha256.clone() else {
            return;
        };
        let generation = job.generation;
        let id = job_id(&k.1);
        let spec = job.spec.clone();
        self.job_status(&k, generation, |s| {
            s.phase = JobPhase::Building;
            s.observed_generation = generation;
            s.message = None;
            s.error = None;
            s.started_at = None;
            s.completed_at = None;
        });
        let built = match self
            .ensure_built(&k.0, &id, &sha, spec.runtime, false)
            .await
        {
            Ok((b, _)) => b,
            Err(msg) => return self.fail_job(&k, generation, format!("build failed: {msg}")),
        };
        let image_ref = format!("local/{}/{}:{}", k.0, k.1, super::build::short_sha(&sha));
        self.job_status(&k, generation, |s| s.image_ref = Some(image_ref));
        match self.run_once(&k, generation, &spec, &built).await {
            Ok(result) => {
                self.job_status(&k, generation, |s| {
                    s.phase = JobPhase::Succeeded;
                    s.message = Some(result);
                    s.error = None;
                    s.completed_at = Some(now_rfc3339());
                });
            }
            Err(error) => self.fail_job(&k, generation, error),
        }
    }

    /// One run: the JSON-encoded return value, or why it failed.
    async fn run_once(
        &self,
        k: &Key,
        generation: u64,
        spec: &JobSpec,
        built: &super::build::Built,
    ) -> std::result::Result<String, String> {
        let id = job_id(&k.1);
        let dir = self
            .opts
            .data_dir
            .join("run")
            .join(&k.0)
            .join(format!("{id}.{generation}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the run dir {}: {e}", dir.display()))?;
        let cleanup = super::build::RemoveOnDrop(dir.clone());
        let (input, output) = (dir.join("input.json"), dir.join("output.json"));
        std::fs::write(&input, &spec.input).map_err(|e| format!("cannot write the input: {e}"))?;

        let mut launch = self.runtime_launch(
            &k.0,
            &id,
            &RunSpec {
                runtime: spec.runtime,
                entrypoint: spec.entrypoint.clone(),
                env_vars: &spec.env_vars,
                secret_env_vars: &spec.secret_env_vars,
                memory_mb: spec.memory_mb,
                timeout_sec: spec.timeout_sec,
            },
            built,
        )?;
        if let Some(sl) = &mut launch.sandbox {
            // A job does not serve; it reads its input and writes its
            // answer in its own run dir.
            sl.serves = false;
            sl.plan.rw.push(dir.clone());
            super::sandbox::chown_tree(&dir, sl.plan.uid)?;
            launch.env.retain(|(k, _)| k != "SLESS_SOCKET");
        }
        // Unsandboxed neither: no socket.
        launch.socket = None;
        launch.args.extend([
            OsString::from("--once"),
            input.into_os_string(),
            output.clone().into_os_string(),
        ]);
        self.logs.rotate(&k.0, &id, LogKind::Run);
        self.logs.append(
            &k.0,
            &id,
            LogKind::Run,
            &format!("=== run of generation {generation} at {}", now_rfc3339()),
        );
        self.job_status(k, generation, |s| {
            s.phase = JobPhase::Running;
            s.started_at = Some(now_rfc3339());
        });
        let logs = self.logs.clone();
        let (ns, log_id) = (k.0.clone(), id.clone());
        let sink: supervisor::LineSink =
            Arc::new(move |line: &str| logs.append(&ns, &log_id, LogKind::Run, line));
        let spawned = supervisor::spawn(&launch, &self.db, sink)?;
        let proc = spawned.into_proc(0, &launch);
        if let Some(slot) = self.jobs.lock().get_mut(k) {
            slot.run_exit = Some(proc.exit_watch());
        }
        let timeout = Duration::from_secs(u64::from(spec.timeout_sec));
        let how = match tokio::time::timeout(timeout, proc.wait_exit()).await {
            Ok(how) => how,
            Err(_) => {
                proc.stop(Duration::ZERO).await;
                self.logs.append(
                    &k.0,
                    &id,
                    LogKind::Run,
                    &format!("sless: killed after timeout_sec {} s", spec.timeout_sec),
                );
                return Err(format!(
                    "the job timed out after {} s (timeout_sec) and was killed",
                    spec.timeout_sec
                ));
            }
        };
        // Let the output pumps write the last lines to the log.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let answer = std::fs::read(&output)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        drop(cleanup);
        let ok = how == "exited with status 0";
        match answer {
            Some(a) if ok && a["ok"] == serde_json::Value::Bool(true) => {
                let result = a.get("result").cloned().unwrap_or(serde_json::Value::Null);
                let text = serde_json::to_string(&result)
                    .map_err(|e| format!("cannot encode the return value: {e}"))?;
                if text.len() > JOB_RESULT_MAX_BYTES {
                    return Err(format!(
                        "the return value is {} bytes as JSON, more than the {JOB_RESULT_MAX_BYTES} bytes a job may return",
                        text.len()
                    ));
                }
                Ok(text)
            }
            Some(a) if a["ok"] == serde_json::Value::Bool(false) => {
                let kind = a["type"].as_str().unwrap_or("Error");
                let msg = a["error"].as_str().unwrap_or("");
                Err(format!(
                    "the job raised {kind}: {msg}{}",
                    self.output_tail(&k.0, &id)
                ))
            }
            _ => Err(format!(
                "the job process {how} without a result{}",
                self.output_tail(&k.0, &id)
            )),
        }
    }

    /// The last lines of a job's run output, for an error message.
    fn output_tail(&self, ns: &str, id: &str) -> String {
        let text = self
            .logs
            .read(ns, id, LogKind::Run, Some(ERROR_TAIL_LINES + 1));
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("=== run")).collect();
        if lines.is_empty() {
            String::new()
        } else {
            format!("\n--- last output lines ---\n{}", lines.join("\n"))
        }
    }

    /// Re-runs every job a previous operator left unfinished (or never ran).
    pub(super) fn restore_jobs(self: &Arc<Self>) -> Result<usize> {
        let mut n = 0;
        let mut slots = self.jobs.lock();
        for job in self.db.list_objects::<Job>(None)? {
            let unfinished =
                job.status.observed_generation < job.generation || !job.status.phase.is_terminal();
            if job.status.code_sha256.is_some() && unfinished {
                self.logs.append(
                    &job.namespace,
                    &job_id(&job.name),
                    LogKind::Build,
                    "sless: the operator restarted before this run finished; running it again",
                );
                self.schedule_job(&mut slots, key(&job.namespace, &job.name));
                n += 1;
            }
        }
        Ok(n)
    }

    /// Aborts every job worker (shutdown); their processes die with them.
    pub(super) async fn stop_jobs(&self) {
        let workers: Vec<_> = self
            .jobs
            .lock()
            .drain()
            .filter_map(|(_, s)| s.worker)
            .collect();
        for w in workers {
            w.abort();
            let _ = w.await;
        }
    }
}

/// A job as created now: generation 1, Pending until code arrives.
pub(super) fn new_job(ns: &str, name: &str, spec: JobSpec) -> Job {
    let now = now_rfc3339();
    Job {
        namespace: ns.to_string(),
        name: name.to_string(),
        generation: 1,
        spec,
        status: JobStatus {
            phase: JobPhase::Pending,
            message: None,
            error: None,
            started_at: None,
            completed_at: None,
            code_sha256: None,
            source_hash: None,
            image_ref: None,
            observed_generation: 0,
        },
        created_at: now.clone(),
        updated_at: now,
    }
}

/// The job operations of the local backend (called by its `Backend` impl).
impl super::LocalBackend {
    /// See `Backend::create_job`.
    pub(super) fn job_create(&self, ns: &str, name: &str, spec: JobSpec) -> Result<Job> {
        self.inner.require_namespace(ns)?;
        let job = new_job(ns, name, spec);
        self.inner.db.insert_object(&job)?;
        let id = job_id(name);
        if let Err(e) = self.inner.store_secrets(ns, &id, &job.spec.secret_env_vars) {
            let _ = self.inner.db.delete_object::<Job>(ns, name);
            return Err(e);
        }
        Ok(job)
    }

    /// See `Backend::update_job`: a change bumps the generation and reruns.
    pub(super) fn job_update(&self, ns: &str, name: &str, update: UpdateJob) -> Result<Job> {
        let inner = &self.inner;
        let mut slots = inner.jobs.lock();
        let mut job = inner.db.object::<Job>(ns, name)?;
        let next = update.apply_to(&job.spec)?;
        if next == job.spec {
            return Ok(job);
        }
        inner.store_secrets(ns, &job_id(name), &next.secret_env_vars)?;
        job.spec = next;
        job.generation += 1;
        job.updated_at = now_rfc3339();
        inner.db.save_object(&job)?;
        if job.status.code_sha256.is_some() {
            inner.schedule_job(&mut slots, key(ns, name));
        }
        Ok(job)
    }

    /// See `Backend::upload_job_code`: new code bumps the generation and runs.
    pub(super) async fn job_upload(&self, ns: &str, name: &str, code: CodeBundle) -> Result<Job> {
        let inner = &self.inner;
        let existing = inner.db.object::<Job>(ns, name)?;
        if existing.status.code_sha256.as_deref() == Some(code.sha256.as_str()) {
            return Ok(existing);
        }
        inner.store_code(&code).await?;
        let (job, old) = {
            let mut slots = inner.jobs.lock();
            // Deleted meanwhile: the zip just stored is nobody's.
            let mut job = inner
                .db
                .object::<Job>(ns, name)
                .inspect_err(|_| inner.release_code(Some(&code.sha256)))?;
            if job.status.code_sha256.as_deref() == Some(code.sha256.as_str()) {
                return Ok(job);
            }
            let old = job.status.code_sha256.replace(code.sha256.clone());
            job.status.source_hash = code.source_hash.clone();
            job.generation += 1;
            job.updated_at = now_rfc3339();
            inner
                .db
                .save_object(&job)
                .inspect_err(|_| inner.release_code(Some(&code.sha256)))?;
            inner.keep_stored(&code);
            inner.schedule_job(&mut slots, key(ns, name));
            (job, old)
        };
        inner.release_code(old.as_deref());
        Ok(job)
    }

    /// See `Backend::delete_job`: kills a running build or run first.
    pub(super) async fn job_delete(&self, ns: &str, name: &str) -> Result<()> {
        let inner = &self.inner;
        let (slot, sha) = {
            let mut slots = inner.jobs.lock();
            let job = inner.db.object::<Job>(ns, name)?;
            inner.db.delete_object::<Job>(ns, name)?;
            (slots.remove(&key(ns, name)), job.status.code_sha256)
        };
        if let Some(JobSlot { worker, run_exit }) = slot {
            if let Some(w) = worker {
                w.abort();
                let _ = w.await;
            }
            // The aborted worker's guard killed the run's process group;
            // answer only once the run process is really gone.
            if let Some(exit) = run_exit
                && !exit.wait(Duration::from_secs(5)).await
            {
                tracing::warn!(
                    namespace = ns,
                    job = name,
                    "a deleted job's run did not exit within 5 s"
                );
            }
        }
        inner.remove_traces(ns, &job_id(name));
        inner.release_code(sha.as_deref());
        Ok(())
    }
}
