//! Triggers of the local backend: their rows in `state.db` (table `triggers`,
//! through a connection of their own), their phase (computed from the target
//! function's state whenever a trigger is read, so a deleted or rebuilding
//! function shows at once and recovery needs no event), their logs under
//! `<data-dir>/trigger-logs/<ns>/<name>/run.log`, and one cron scheduler task
//! per enabled cron trigger (see [`super::cron`]).

use super::cron::{self, RunState};
use super::db::now_rfc3339;
use super::logs::Logs;
use super::{Inner, Key, key};
use crate::{Error, Result};
use rusqlite::{Connection, OptionalExtension, params};
use sless_wire::function::LogKind;
use sless_wire::trigger::{
    Trigger, TriggerPhase, TriggerSpec, TriggerStatus, TriggerType, UpdateTrigger,
};
use sless_wire::{Function, Phase};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS triggers (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (namespace, name)
);
";

const SELECT: &str = "SELECT namespace, name, spec, status, created_at, updated_at FROM triggers";

type Row = (String, String, String, String, String, String);

fn json_err(e: serde_json::Error) -> Error {
    Error::Internal(format!("corrupt trigger JSON in the state database: {e}"))
}

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn decode(raw: Row) -> Result<Trigger> {
    let (namespace, name, spec, status, created_at, updated_at) = raw;
    Ok(Trigger {
        namespace,
        name,
        spec: serde_json::from_str(&spec).map_err(json_err)?,
        status: serde_json::from_str(&status).map_err(json_err)?,
        created_at,
        updated_at,
    })
}

fn not_found(ns: &str, name: &str) -> Error {
    Error::NotFound {
        kind: "trigger",
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

/// The `triggers` table.
#[derive(Debug)]
pub struct TriggerStore {
    conn: Mutex<Connection>,
}

impl TriggerStore {
    /// Opens `state.db` (already created by [`super::db::Db::open`]) and
    /// creates the `triggers` table when missing.
    pub fn open(path: &Path) -> Result<TriggerStore> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(TriggerStore {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Inserts a new trigger; `AlreadyExists` when the name is taken.
    pub fn insert(&self, t: &Trigger) -> Result<()> {
        let spec = serde_json::to_string(&t.spec).map_err(json_err)?;
        let status = serde_json::to_string(&t.status).map_err(json_err)?;
        let res = self.conn().execute(
            "INSERT INTO triggers (namespace, name, spec, status, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                t.namespace,
                t.name,
                spec,
                status,
                t.created_at,
                t.updated_at
            ],
        );
        match res {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(Error::AlreadyExists {
                    kind: "trigger",
                    namespace: t.namespace.clone(),
                    name: t.name.clone(),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads one trigger, `None` when missing.
    pub(super) fn get(&self, ns: &str, name: &str) -> Result<Option<Trigger>> {
        let raw = self
            .conn()
            .query_row(
                &format!("{SELECT} WHERE namespace = ?1 AND name = ?2"),
                params![ns, name],
                read_row,
            )
            .optional()?;
        raw.map(decode).transpose()
    }

    /// A namespace's triggers sorted by name, or every trigger when `ns` is `None`.
    pub(super) fn list(&self, ns: Option<&str>) -> Result<Vec<Trigger>> {
        let rows = {
            let conn = self.conn();
            match ns {
                Some(ns) => {
                    let mut stmt =
                        conn.prepare(&format!("{SELECT} WHERE namespace = ?1 ORDER BY name"))?;
                    stmt.query_map([ns], read_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
                None => {
                    let mut stmt = conn.prepare(&format!("{SELECT} ORDER BY namespace, name"))?;
                    stmt.query_map([], read_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
            }
        };
        rows.into_iter().map(decode).collect()
    }

    /// Writes spec and `updated_at`; false when the trigger is gone.
    pub fn save_spec(&self, t: &Trigger) -> Result<bool> {
        let spec = serde_json::to_string(&t.spec).map_err(json_err)?;
        let n = self.conn().execute(
            "UPDATE triggers SET spec = ?3, updated_at = ?4 WHERE namespace = ?1 AND name = ?2",
            params![t.namespace, t.name, spec, t.updated_at],
        )?;
        Ok(n == 1)
    }

    /// Changes the stored status in one read-modify-write; false when the
    /// trigger is gone.
    pub fn update_status(
        &self,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut TriggerStatus),
    ) -> Result<bool> {
        let conn = self.conn();
        let raw: Option<String> = conn
            .query_row(
                "SELECT status FROM triggers WHERE namespace = ?1 AND name = ?2",
                params![ns, name],
                |r| r.get(0),
            )
            .optional()?;
        let Some(raw) = raw else {
            return Ok(false);
        };
        let mut status: TriggerStatus = serde_json::from_str(&raw).map_err(json_err)?;
        f(&mut status);
        let text = serde_json::to_string(&status).map_err(json_err)?;
        let n = conn.execute(
            "UPDATE triggers SET status = ?3 WHERE namespace = ?1 AND name = ?2",
            params![ns, name, text],
        )?;
        Ok(n == 1)
    }

    /// Deletes a trigger; false when it did not exist.
    pub fn delete(&self, ns: &str, name: &str) -> Result<bool> {
        let n = self.conn().execute(
            "DELETE FROM triggers WHERE namespace = ?1 AND name = ?2",
            params![ns, name],
        )?;
        Ok(n == 1)
    }
}

/// A running cron scheduler.
struct Scheduler {
    task: tokio::task::JoinHandle<()>,
}

/// All triggers of the local backend: storage, logs and cron schedulers.
pub struct Triggers {
    /// The `triggers` table.
    pub store: TriggerStore,
    /// Trigger logs (`LogKind::Run` only).
    pub logs: Arc<Logs>,
    /// The HTTP client of cron runs (the invoke proxy's kind).
    pub client: reqwest::Client,
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

impl Triggers {
    /// Opens the trigger table in `state.db` and the trigger logs.
    pub fn open(data_dir: &Path, log_max_bytes: u64) -> Result<Triggers> {
        Ok(Triggers {
            store: TriggerStore::open(&data_dir.join("state.db"))?,
            logs: Arc::new(Logs::new(data_dir.join("trigger-logs"), log_max_bytes)),
            client: crate::api::proxy::client()
                .map_err(|e| Error::Internal(format!("building the cron HTTP client: {e}")))?,
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
            if let Err(e) = self
                .store
                .update_status(&k.0, &k.1, |s| s.next_run_at = None)
            {
                tracing::error!(error = %e, "cannot save trigger status");
            }
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
        for t in self.store.list(None)? {
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
        let now = now_rfc3339();
        let t = Trigger {
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
        };
        self.store.insert(&t)?;
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
    pub(super) fn get(&self, inner: &Inner, ns: &str, name: &str) -> Result<Trigger> {
        let t = self
            .store
            .get(ns, name)?
            .ok_or_else(|| not_found(ns, name))?;
        self.with_phase(inner, t)
    }

    /// A namespace's triggers with their current phases.
    pub(super) fn list(&self, inner: &Inner, ns: &str) -> Result<Vec<Trigger>> {
        self.store
            .list(Some(ns))?
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
            .store
            .get(ns, name)?
            .ok_or_else(|| not_found(ns, name))?;
        let next = update.apply_to(&t.spec)?;
        if next != t.spec {
            t.spec = next;
            t.updated_at = now_rfc3339();
            self.store.save_spec(&t)?;
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
        if !self.store.delete(ns, name)? {
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
        if self.store.get(ns, name)?.is_none() {
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

    #[test]
    fn rows_round_trip_and_status_updates_keep_the_spec() {
        let tmp = tempfile::tempdir().unwrap();
        let store = TriggerStore::open(&tmp.path().join("state.db")).unwrap();
        let t = Trigger {
            namespace: "sless-1".into(),
            name: "t".into(),
            spec: spec(true),
            status: TriggerStatus {
                phase: TriggerPhase::Waiting,
                message: None,
                url: None,
                next_run_at: None,
                last_run: None,
                runs: 0,
                skipped: 0,
            },
            created_at: now_rfc3339(),
            updated_at: now_rfc3339(),
        };
        store.insert(&t).unwrap();
        assert!(matches!(store.insert(&t), Err(Error::AlreadyExists { .. })));
        assert!(
            store
                .update_status("sless-1", "t", |s| s.skipped = 3)
                .unwrap()
        );
        let back = store.get("sless-1", "t").unwrap().unwrap();
        assert_eq!(back.status.skipped, 3);
        assert_eq!(back.spec, t.spec);
        assert!(store.delete("sless-1", "t").unwrap());
        assert!(
            !store
                .update_status("sless-1", "t", |s| s.skipped = 4)
                .unwrap()
        );
    }
}
