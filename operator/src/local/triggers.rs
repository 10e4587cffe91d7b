//! Triggers of the local backend: their rows in `state.db` (table `triggers`,
//! through the typed methods of [`Db`]), their phase (computed from the target
//! function's state whenever a trigger is read, so a deleted or rebuilding
//! function shows at once and recovery needs no event), their logs under
//! `<data-dir>/trigger-logs/<ns>/<name>/run.log`, and one cron scheduler task
//! per enabled cron trigger (see [`super::cron`]).

use super::cron::{self, RunState};
use super::db::{Db, now_rfc3339};
use super::logs::Logs;
use super::{Inner, Key, key};
use crate::{Error, Result};
use sless_wire::function::LogKind;
use sless_wire::trigger::{
    Trigger, TriggerPhase, TriggerSpec, TriggerStatus, TriggerType, UpdateTrigger,
};
use sless_wire::{Function, Phase};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn not_found(ns: &str, name: &str) -> Error {
    Error::NotFound {
        kind: "trigger",
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

/// A running cron scheduler.
struct Scheduler {
    task: tokio::task::JoinHandle<()>,
}

/// All triggers of the local backend: storage, logs and cron schedulers.
pub struct Triggers {
    /// The state database (its `triggers` table).
    db: Arc<Db>,
    /// Trigger logs (`LogKind::Run` only).
    pub logs: Arc<Logs>,
    /// The HTTP client of cron runs (the invoke proxy's kind).
    pub client: crate::api::upstream::Upstream,
    schedulers: Mutex<HashMap<Key, Scheduler>>,
    /// Per trigger: whether a run is going, shared across scheduler restarts
    /// so an update never lets two runs overlap.
    runs: Mutex<HashMap<Key, Arc<RunState>>>,
    /// Serialises spec changes of one backend (create/update/delete/restore).
    changes: tokio::sync::Mutex<()>,
    shutting_down: AtomicBool,
}

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers").finish_non_exhaustive()
    }
}

/// The phase and message a trigger has given its spec and its function.
pub fn phase_of(spec: &TriggerSpec, function: Option<&Function>) -> (TriggerPhase, Option<String>) {
    if !spec.enabled {
        return (
            TriggerPhase::Disabled,
            Some("the trigger is disabled (enabled = false)".into()),
        );
    }
    match function {
        None => (
            TriggerPhase::Waiting,
            Some(format!(
                "function {:?} not found: waiting for it to be created",
                spec.function
            )),
        ),
        Some(f) if f.status.phase != Phase::Ready => {
            let why = f
                .status
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            (
                TriggerPhase::Waiting,
                Some(format!(
                    "function {:?} is not Ready yet (phase {:?}{why})",
                    spec.function, f.status.phase
                )),
            )
        }
        Some(_) => (TriggerPhase::Active, None),
    }
}

/// A trigger as created now: no runs yet, its phase to be computed on read.
pub(super) fn new_trigger(ns: &str, name: &str, spec: TriggerSpec) -> Trigger {
    let now = now_rfc3339();
    Trigger {
        namespace: ns.to_string(),
        name: name.to_string(),
        spec,
        status: TriggerStatus {
            phase: TriggerPhase::Waiting,
            message: None,
            url: None,
            next_run_at: None,
            last_run: None,
            runs: 0,
            skipped: 0,
        },
        created_at: now.clone(),
        updated_at: now,
    }
}

impl Triggers {
    /// Triggers kept in `db`, with their logs under `<data-dir>/trigger-logs`.
    pub fn open(db: Arc<Db>, data_dir: &Path, log_max_bytes: u64) -> Result<Triggers> {
        Ok(Triggers {
            db,
            logs: Arc::new(Logs::new(data_dir.join("trigger-logs"), log_max_bytes)),
            client: crate::api::upstream::Upstream::tcp(),
            schedulers: Mutex::new(HashMap::new()),
            runs: Mutex::new(HashMap::new()),
            changes: tokio::sync::Mutex::new(()),
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Appends a line to a trigger's log, stamped with the time.
    pub fn log(&self, key: &Key, text: &str) {
        self.logs.append(
            &key.0,
            &key.1,
            LogKind::Run,
            &format!("{} {text}", now_rfc3339()),
        );
    }

    /// Changes the stored status of a trigger (nothing when it is gone); a
    /// database error is logged.
    pub(super) fn save_status(&self, key: &Key, f: impl FnOnce(&mut TriggerStatus)) {
        if let Err(e) = self.db.update_trigger_status(&key.0, &key.1, f) {
            tracing::error!(error = %e, "cannot save trigger status");
        }
    }

    fn run_state(&self, key: &Key) -> Arc<RunState> {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .clone()
    }

    /// Stops the scheduler of `key`, if any, and waits until it has stopped.
    async fn stop_scheduler(&self, key: &Key) {
        let old = self
            .schedulers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        if let Some(s) = old {
            s.task.abort();
            let _ = s.task.await;
        }
    }

    /// (Re)starts the scheduler of a trigger as its spec now says: none for
    /// http or disabled triggers.
    async fn reschedule(&self, inner: &Arc<Inner>, t: &Trigger) {
        let k = key(&t.namespace, &t.name);
        self.stop_scheduler(&k).await;
        let wanted = t.spec.trigger_type == TriggerType::Cron && t.spec.enabled;
        if !wanted || self.shutting_down.load(Ordering::SeqCst) {
            self.save_status(&k, |s| s.next_run_at = None);
            return;
        }
        let run = self.run_state(&k);
        let task = tokio::spawn(cron::schedule(
            inner.clone(),
            k.clone(),
            t.spec.clone(),
            run,
        ));
        self.schedulers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(k, Scheduler { task });
    }

    /// Starts the schedulers of every enabled cron trigger (operator start).
    pub(super) async fn restore(&self, inner: &Arc<Inner>) -> Result<usize> {
        let _g = self.changes.lock().await;
        let mut n = 0;
        for t in self.db.list_triggers(None)? {
            if t.spec.trigger_type == TriggerType::Cron && t.spec.enabled {
                self.reschedule(inner, &t).await;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Fills in the phase and message from the function's state now.
    pub(super) fn with_phase(&self, inner: &Inner, mut t: Trigger) -> Result<Trigger> {
        let f = inner.db.get_function(&t.namespace, &t.spec.function)?;
        let (phase, message) = phase_of(&t.spec, f.as_ref());
        t.status.phase = phase;
        t.status.message = message;
        if t.spec.trigger_type != TriggerType::Cron || !t.spec.enabled {
            t.status.next_run_at = None;
        }
        Ok(t)
    }

    /// Creates a trigger and starts its scheduler (cron).
    pub(super) async fn create(
        &self,
        inner: &Arc<Inner>,
        ns: &str,
        name: &str,
        spec: TriggerSpec,
    ) -> Result<Trigger> {
        let _g = self.changes.lock().await;
        let t = new_trigger(ns, name, spec);
        self.db.insert_trigger(&t)?;
        // A trigger of the same name deleted earlier leaves no log behind.
        self.logs.remove(ns, name);
        self.log(
            &key(ns, name),
            &format!(
                "created: {} trigger of function {:?}{}",
                t.spec.trigger_type.as_str(),
                t.spec.function,
                t.spec
                    .schedule
                    .as_deref()
                    .map(|s| format!(" on schedule {s:?}"))
                    .unwrap_or_default()
            ),
        );
        self.reschedule(inner, &t).await;
        self.get(inner, ns, name)
    }

    /// Reads one trigger with its current phase.
    /// Reads one trigger's spec (from memory after the first read).
    pub(super) fn spec(&self, ns: &str, name: &str) -> Result<Arc<TriggerSpec>> {
        self.db
            .trigger_spec(ns, name)?
            .ok_or_else(|| not_found(ns, name))
    }

    pub(super) fn get(&self, inner: &Inner, ns: &str, name: &str) -> Result<Trigger> {
        let t = self
            .db
            .get_trigger(ns, name)?
            .ok_or_else(|| not_found(ns, name))?;
        self.with_phase(inner, t)
    }

    /// A namespace's triggers with their current phases.
    pub(super) fn list(&self, inner: &Inner, ns: &str) -> Result<Vec<Trigger>> {
        self.db
            .list_triggers(Some(ns))?
            .into_iter()
            .map(|t| self.with_phase(inner, t))
            .collect()
    }

    /// Applies a partial update and restarts the scheduler with the new spec.
    pub(super) async fn update(
        &self,
        inner: &Arc<Inner>,
        ns: &str,
        name: &str,
        update: UpdateTrigger,
    ) -> Result<Trigger> {
        let _g = self.changes.lock().await;
        let mut t = self
            .db
            .get_trigger(ns, name)?
            .ok_or_else(|| not_found(ns, name))?;
        let next = update.apply_to(&t.spec)?;
        if next != t.spec {
            t.spec = next;
            t.updated_at = now_rfc3339();
            self.db.save_trigger_spec(&t)?;
            self.log(
                &key(ns, name),
                &format!(
                    "updated: function {:?}, enabled {}{}",
                    t.spec.function,
                    t.spec.enabled,
                    t.spec
                        .schedule
                        .as_deref()
                        .map(|s| format!(", schedule {s:?}"))
                        .unwrap_or_default()
                ),
            );
            self.reschedule(inner, &t).await;
        }
        self.get(inner, ns, name)
    }

    /// Deletes a trigger: its scheduler and any run still going are stopped
    /// before this returns, and its log is removed.
    pub async fn delete(&self, ns: &str, name: &str) -> Result<()> {
        let _g = self.changes.lock().await;
        if !self.db.delete_trigger(ns, name)? {
            return Err(not_found(ns, name));
        }
        let k = key(ns, name);
        self.stop_scheduler(&k).await;
        let run = self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&k);
        if let Some(run) = run {
            run.cancel().await;
        }
        self.logs.remove(ns, name);
        Ok(())
    }

    /// The trigger's log.
    pub async fn read_logs(&self, ns: &str, name: &str, tail: Option<usize>) -> Result<String> {
        if self.db.get_trigger(ns, name)?.is_none() {
            return Err(not_found(ns, name));
        }
        let logs = self.logs.clone();
        let (ns, n) = (ns.to_string(), name.to_string());
        tokio::task::spawn_blocking(move || logs.read(&ns, &n, LogKind::Run, tail))
            .await
            .map_err(|e| Error::Internal(format!("reading trigger logs: {e}")))
    }

    /// Stops every scheduler and every run (operator shutdown).
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        let scheds: Vec<Scheduler> = self
            .schedulers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in scheds {
            s.task.abort();
            let _ = s.task.await;
        }
        let runs: Vec<Arc<RunState>> = self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, r)| r)
            .collect();
        for r in runs {
            r.cancel().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(enabled: bool) -> TriggerSpec {
        TriggerSpec {
            function: "f".into(),
            trigger_type: TriggerType::Cron,
            schedule: Some("* * * * *".into()),
            payload: None,
            enabled,
        }
    }

    #[test]
    fn phase_follows_the_function() {
        assert_eq!(phase_of(&spec(false), None).0, TriggerPhase::Disabled);
        let (p, m) = phase_of(&spec(true), None);
        assert_eq!(p, TriggerPhase::Waiting);
        assert!(m.unwrap().contains("\"f\" not found"));
    }
}
