//! The local backend's state in SQLite (`<data-dir>/state.db`): namespaces,
//! functions and triggers (spec and status as JSON columns), jobs and
//! services (the `objects` table, see [`super::objects`]) and the process
//! groups it started (so a restarted operator can reclaim them). WAL journal
//! with `synchronous=FULL`: a committed write survives a crash or power loss.
//!
//! One connection for the whole file, and this is the one place where its
//! schema lives. Tables are only ever added (`CREATE TABLE IF NOT EXISTS`,
//! column names kept), so a `state.db` of an older version opens as it is.
//! Queries are short; callers hold the connection mutex only for one query.

use crate::{Error, Result};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sless_wire::function::{FunctionSpec, FunctionStatus};
use sless_wire::trigger::{Trigger, TriggerSpec, TriggerStatus};
use sless_wire::{Function, paths};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// Current schema version, stored in `schema_version`.
pub const SCHEMA_VERSION: i64 = 1;

/// Every table, created when missing. Additive only: a new table needs no
/// schema version change; changing a table would.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sandbox_uids (
    namespace TEXT PRIMARY KEY,
    idx INTEGER NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS functions (
    namespace TEXT NOT NULL REFERENCES namespaces(name),
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE TABLE IF NOT EXISTS processes (
    pgid INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL REFERENCES namespaces(name),
    name TEXT NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);
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

/// The state database.
#[derive(Debug)]
pub struct Db {
    conn: Mutex<Connection>,
    /// Trigger specs by namespace and name, for routing public trigger URLs
    /// without a database read (see [`Db::trigger_spec`]).
    trigger_specs: Mutex<HashMap<String, HashMap<String, Arc<TriggerSpec>>>>,
}

/// The current time as RFC 3339 (seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The columns of a [`SpecRow`]: namespace, name, spec, status, created_at,
/// updated_at.
type Columns<N, S, T> = (N, N, S, T, N, N);

/// A kind kept as rows of `namespace, name, spec, status, created_at,
/// updated_at` with spec and status as JSON: functions and triggers.
trait SpecRow: Sized {
    /// Its table.
    const TABLE: &'static str;
    /// The kind in `AlreadyExists` errors.
    const KIND: &'static str;
    /// What its JSON is called in "corrupt ..." errors.
    const JSON: &'static str;
    /// Its spec, stored as JSON.
    type Spec: Serialize + DeserializeOwned;
    /// Its status, stored as JSON.
    type Status: Serialize + DeserializeOwned;
    /// Its columns.
    fn columns(&self) -> Columns<&str, &Self::Spec, &Self::Status>;
    /// The value of a row.
    fn from_columns(c: Columns<String, Self::Spec, Self::Status>) -> Self;
    /// Fills in what is not stored (called on every value read).
    fn loaded(self) -> Self {
        self
    }
}

/// `impl SpecRow` for a wire type with the six fields of the columns.
macro_rules! spec_row {
    ($ty:ident in $table:literal as $kind:literal, $json:literal, $spec:ty, $status:ty; $($extra:item)*) => {
        impl SpecRow for $ty {
            const TABLE: &'static str = $table;
            const KIND: &'static str = $kind;
            const JSON: &'static str = $json;
            type Spec = $spec;
            type Status = $status;
            fn columns(&self) -> Columns<&str, &$spec, &$status> {
                let $ty { namespace, name, spec, status, created_at, updated_at } = self;
                (namespace, name, spec, status, created_at, updated_at)
            }
            fn from_columns(c: Columns<String, $spec, $status>) -> $ty {
                let (namespace, name, spec, status, created_at, updated_at) = c;
                $ty { namespace, name, spec, status, created_at, updated_at }
            }
            $($extra)*
        }
    };
}

spec_row!(Function in "functions" as "function", "JSON", FunctionSpec, FunctionStatus;
    /// `invoke_path` is not stored: it follows from namespace and name.
    fn loaded(mut self) -> Function {
        self.status.invoke_path = paths::function_invoke(&self.namespace, &self.name);
        self
    }
);
spec_row!(Trigger in "triggers" as "trigger", "trigger JSON", TriggerSpec, TriggerStatus;);

type RawRow = (String, String, String, String, String, String);

fn json_err<T: SpecRow>(e: serde_json::Error) -> Error {
    Error::Internal(format!("corrupt {} in the state database: {e}", T::JSON))
}

fn to_json<T: SpecRow>(value: &impl Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(json_err::<T>)
}

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn decode<T: SpecRow>(raw: RawRow) -> Result<T> {
    let (namespace, name, spec, status, created_at, updated_at) = raw;
    let spec = serde_json::from_str(&spec).map_err(json_err::<T>)?;
    let status = serde_json::from_str(&status).map_err(json_err::<T>)?;
    Ok(T::from_columns((namespace, name, spec, status, created_at, updated_at)).loaded())
}

fn select<T: SpecRow>(filter: &str) -> String {
    format!(
        "SELECT namespace, name, spec, status, created_at, updated_at FROM {} {filter}",
        T::TABLE
    )
}

/// The `AlreadyExists` error of an insert that hit the primary key.
pub(super) fn name_taken(
    res: rusqlite::Result<usize>,
    kind: &'static str,
    ns: &str,
    name: &str,
) -> Result<()> {
    match res {
        Ok(_) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Err(Error::AlreadyExists {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            })
        }
        Err(e) => Err(e.into()),
    }
}

impl Db {
    /// Opens (creating when missing) the database at `path` and migrates it.
    /// A file that is not a readable state database is an error naming it,
    /// never replaced: the objects it holds are users' data.
    pub fn open(path: &Path) -> Result<Db> {
        Db::open_unnamed(path).map_err(|e| match e {
            Error::Storage(rusqlite::Error::SqliteFailure(f, _))
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
                ) =>
            {
                Error::StateDatabase(format!(
                    "state database {}: {f}: it is corrupt or not a sless state database. \
                     The operator leaves it untouched: restore it from a backup, or move it \
                     aside to start with no objects",
                    path.display()
                ))
            }
            Error::Storage(rusqlite::Error::SqliteFailure(f, _))
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                Error::StateDatabase(format!(
                    "state database {}: {f}: another program holds a lock on it (an sqlite \
                     shell or a backup tool?); close it and start again",
                    path.display()
                ))
            }
            Error::Storage(se) => {
                Error::StateDatabase(format!("state database {}: {se}", path.display()))
            }
            other => other,
        })
    }

    fn open_unnamed(path: &Path) -> Result<Db> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        let version: Option<i64> = conn
            .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
            .optional()?;
        match version {
            None => {
                conn.execute(
                    "INSERT INTO schema_version (version) VALUES (?1)",
                    [SCHEMA_VERSION],
                )?;
            }
            Some(v) if v > SCHEMA_VERSION => {
                return Err(Error::StateDatabase(format!(
                    "state database {} has schema version {v}, newer than this operator's {SCHEMA_VERSION}; \
                     use a newer sless-operator",
                    path.display()
                )));
            }
            Some(_) => {}
        }
        Ok(Db {
            conn: Mutex::new(conn),
            trigger_specs: Mutex::new(HashMap::new()),
        })
    }

    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the namespace when missing; true when it was created.
    pub fn ensure_namespace(&self, ns: &str) -> Result<bool> {
        let n = self.conn().execute(
            "INSERT OR IGNORE INTO namespaces (name, created_at) VALUES (?1, ?2)",
            params![ns, now_rfc3339()],
        )?;
        Ok(n == 1)
    }

    /// The sandbox index of a namespace (0, 1, 2, … in the order namespaces
    /// first ran code; never reused), allocated on first use.
    pub fn sandbox_index(&self, ns: &str) -> Result<u32> {
        let conn = self.conn();
        conn.execute(
            "INSERT OR IGNORE INTO sandbox_uids (namespace, idx) \
             SELECT ?1, COALESCE(MAX(idx) + 1, 0) FROM sandbox_uids",
            [ns],
        )?;
        let idx: i64 = conn.query_row(
            "SELECT idx FROM sandbox_uids WHERE namespace = ?1",
            [ns],
            |r| r.get(0),
        )?;
        Ok(u32::try_from(idx).unwrap_or(u32::MAX))
    }

    /// True when the namespace exists.
    pub fn namespace_exists(&self, ns: &str) -> Result<bool> {
        Ok(self
            .conn()
            .query_row("SELECT 1 FROM namespaces WHERE name = ?1", [ns], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn insert_row<T: SpecRow>(&self, t: &T) -> Result<()> {
        let (ns, name, spec, status, created_at, updated_at) = t.columns();
        let (spec, status) = (to_json::<T>(spec)?, to_json::<T>(status)?);
        let res = self.conn().execute(
            &format!(
                "INSERT INTO {} (namespace, name, spec, status, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                T::TABLE
            ),
            params![ns, name, spec, status, created_at, updated_at],
        );
        name_taken(res, T::KIND, ns, name)
    }

    fn get_row<T: SpecRow>(&self, ns: &str, name: &str) -> Result<Option<T>> {
        // Cached statement: every proxied request reads its function (and a
        // trigger call its trigger); parsing the SQL each time was about a
        // third of the operator's instructions per request (callgrind).
        let raw = self
            .conn()
            .prepare_cached(&select::<T>("WHERE namespace = ?1 AND name = ?2"))?
            .query_row(params![ns, name], read_row)
            .optional()?;
        raw.map(decode).transpose()
    }

    /// Rows of one namespace (or of all, with `None`) sorted by name.
    fn list_rows<T: SpecRow>(&self, ns: Option<&str>) -> Result<Vec<T>> {
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached(&select::<T>(
                "WHERE ?1 IS NULL OR namespace = ?1 ORDER BY namespace, name",
            ))?;
            stmt.query_map([ns], read_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        rows.into_iter().map(decode).collect()
    }

    fn delete_row<T: SpecRow>(&self, ns: &str, name: &str) -> Result<bool> {
        let n = self.conn().execute(
            &format!(
                "DELETE FROM {} WHERE namespace = ?1 AND name = ?2",
                T::TABLE
            ),
            params![ns, name],
        )?;
        Ok(n == 1)
    }

    /// Inserts a new function; `AlreadyExists` when the name is taken.
    pub fn insert_function(&self, f: &Function) -> Result<()> {
        self.insert_row(f)
    }

    /// Reads one function, `None` when missing.
    pub fn get_function(&self, ns: &str, name: &str) -> Result<Option<Function>> {
        self.get_row(ns, name)
    }

    /// A namespace's functions sorted by name.
    pub fn list_functions(&self, ns: &str) -> Result<Vec<Function>> {
        self.list_rows(Some(ns))
    }

    /// Every function of every namespace.
    pub fn all_functions(&self) -> Result<Vec<Function>> {
        self.list_rows(None)
    }

    /// Writes a function's spec, status and `updated_at`; false when it is gone.
    pub fn save_function(&self, f: &Function) -> Result<bool> {
        let spec = to_json::<Function>(&f.spec)?;
        let status = to_json::<Function>(&f.status)?;
        let n = self.conn().execute(
            "UPDATE functions SET spec = ?3, status = ?4, updated_at = ?5
             WHERE namespace = ?1 AND name = ?2",
            params![f.namespace, f.name, spec, status, f.updated_at],
        )?;
        Ok(n == 1)
    }

    /// Deletes a function; false when it did not exist.
    pub fn delete_function(&self, ns: &str, name: &str) -> Result<bool> {
        self.delete_row::<Function>(ns, name)
    }

    /// Inserts a new trigger; `AlreadyExists` when the name is taken.
    pub fn insert_trigger(&self, t: &Trigger) -> Result<()> {
        let res = self.insert_row(t);
        self.forget_trigger_spec(&t.namespace, &t.name);
        res
    }

    /// A trigger's spec, `None` when missing: from memory after the first
    /// read (every public trigger call needs it). Only existing triggers are
    /// kept, so the map is as large as the trigger table at most. The miss
    /// path reads and fills under the connection's lock and every write of
    /// a trigger's spec forgets it after writing, so a read can never put
    /// back a spec a write replaced.
    pub fn trigger_spec(&self, ns: &str, name: &str) -> Result<Option<Arc<TriggerSpec>>> {
        if let Some(spec) = self.specs().get(ns).and_then(|m| m.get(name)) {
            return Ok(Some(spec.clone()));
        }
        let conn = self.conn();
        let raw = conn
            .prepare_cached(&select::<Trigger>("WHERE namespace = ?1 AND name = ?2"))?
            .query_row(params![ns, name], read_row)
            .optional()?;
        let Some(t) = raw.map(decode::<Trigger>).transpose()? else {
            return Ok(None);
        };
        let spec = Arc::new(t.spec);
        self.specs()
            .entry(ns.to_string())
            .or_default()
            .insert(name.to_string(), spec.clone());
        drop(conn);
        Ok(Some(spec))
    }

    fn specs(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, Arc<TriggerSpec>>>> {
        self.trigger_specs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn forget_trigger_spec(&self, ns: &str, name: &str) {
        let mut specs = self.specs();
        if let Some(m) = specs.get_mut(ns) {
            m.remove(name);
            if m.is_empty() {
                specs.remove(ns);
            }
        }
    }

    /// Reads one trigger, `None` when missing.
    pub fn get_trigger(&self, ns: &str, name: &str) -> Result<Option<Trigger>> {
        self.get_row(ns, name)
    }

    /// A namespace's triggers sorted by name, or every trigger when `ns` is `None`.
    pub fn list_triggers(&self, ns: Option<&str>) -> Result<Vec<Trigger>> {
        self.list_rows(ns)
    }

    /// Writes a trigger's spec and `updated_at`; false when it is gone.
    pub fn save_trigger_spec(&self, t: &Trigger) -> Result<bool> {
        let spec = to_json::<Trigger>(&t.spec)?;
        let n = self.conn().execute(
            "UPDATE triggers SET spec = ?3, updated_at = ?4 WHERE namespace = ?1 AND name = ?2",
            params![t.namespace, t.name, spec, t.updated_at],
        )?;
        self.forget_trigger_spec(&t.namespace, &t.name);
        Ok(n == 1)
    }

    /// Changes a trigger's stored status in one read-modify-write (under the
    /// connection mutex); false when the trigger is gone.
    pub fn update_trigger_status(
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
        let mut status: TriggerStatus = serde_json::from_str(&raw).map_err(json_err::<Trigger>)?;
        f(&mut status);
        let text = to_json::<Trigger>(&status)?;
        let n = conn.execute(
            "UPDATE triggers SET status = ?3 WHERE namespace = ?1 AND name = ?2",
            params![ns, name, text],
        )?;
        Ok(n == 1)
    }

    /// Deletes a trigger; false when it did not exist.
    pub fn delete_trigger(&self, ns: &str, name: &str) -> Result<bool> {
        let deleted = self.delete_row::<Trigger>(ns, name);
        self.forget_trigger_spec(ns, name);
        deleted
    }

    /// True when any function's (or job's, service's) status names this code.
    pub fn code_in_use(&self, sha256: &str) -> Result<bool> {
        let in_functions = self
            .conn()
            .query_row(
                "SELECT 1 FROM functions WHERE json_extract(status, '$.code_sha256') = ?1 LIMIT 1",
                [sha256],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        Ok(in_functions || self.object_code_in_use(sha256)?)
    }

    /// Records a process group the backend started.
    pub fn record_process(&self, pgid: u32, kind: &str, ns: &str, name: &str) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO processes (pgid, kind, namespace, name) VALUES (?1, ?2, ?3, ?4)",
            params![pgid, kind, ns, name],
        )?;
        Ok(())
    }

    /// Forgets a process group (it exited).
    pub fn forget_process(&self, pgid: u32) -> Result<()> {
        self.conn()
            .execute("DELETE FROM processes WHERE pgid = ?1", [pgid])?;
        Ok(())
    }

    /// Every recorded process group; used once at start.
    pub fn recorded_processes(&self) -> Result<Vec<u32>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT pgid FROM processes")?;
        let rows = stmt
            .query_map([], |r| r.get::<_, u32>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Forgets every recorded process group.
    pub fn clear_processes(&self) -> Result<()> {
        self.conn().execute("DELETE FROM processes", [])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sless_wire::trigger::TriggerType;
    use sless_wire::{Phase, Runtime};

    #[test]
    fn sandbox_indexes_are_allocated_once_and_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.db");
        let db = Db::open(&path).unwrap();
        assert_eq!(db.sandbox_index("ns-a").unwrap(), 0);
        assert_eq!(db.sandbox_index("ns-b").unwrap(), 1);
        assert_eq!(
            db.sandbox_index("ns-a").unwrap(),
            0,
            "the same uid every time"
        );
        drop(db);
        let db = Db::open(&path).unwrap();
        assert_eq!(db.sandbox_index("ns-b").unwrap(), 1);
        assert_eq!(db.sandbox_index("ns-c").unwrap(), 2);
    }

    fn function(ns: &str, name: &str) -> Function {
        Function {
            namespace: ns.into(),
            name: name.into(),
            spec: FunctionSpec {
                runtime: Runtime::Python311,
                entrypoint: "main.handler".into(),
                env_vars: Default::default(),
                secret_env_vars: Default::default(),
                memory_mb: 128,
                timeout_sec: 30,
                min_instances: 0,
                idle_timeout_sec: 300,
            },
            status: FunctionStatus {
                phase: Phase::Pending,
                message: None,
                code_sha256: None,
                source_hash: None,
                image_ref: None,
                last_built_at: None,
                invoke_path: String::new(),
                restarts: 0,
                instances: 0,
            },
            created_at: now_rfc3339(),
            updated_at: now_rfc3339(),
        }
    }

    #[test]
    fn functions_round_trip_and_survive_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.db");
        {
            let db = Db::open(&path).unwrap();
            assert!(db.ensure_namespace("sless-1").unwrap());
            assert!(!db.ensure_namespace("sless-1").unwrap());
            db.insert_function(&function("sless-1", "b")).unwrap();
            db.insert_function(&function("sless-1", "a")).unwrap();
            assert!(matches!(
                db.insert_function(&function("sless-1", "a")),
                Err(Error::AlreadyExists { .. })
            ));
            let mut f = db.get_function("sless-1", "a").unwrap().unwrap();
            f.status.code_sha256 = Some("abc".into());
            assert!(db.save_function(&f).unwrap());
            db.record_process(42, "run", "sless-1", "a").unwrap();
        }
        let db = Db::open(&path).unwrap();
        let names: Vec<_> = db
            .list_functions("sless-1")
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        let a = db.get_function("sless-1", "a").unwrap().unwrap();
        assert_eq!(a.status.invoke_path, paths::function_invoke("sless-1", "a"));
        assert!(db.code_in_use("abc").unwrap());
        assert_eq!(db.recorded_processes().unwrap(), [42]);
        assert!(db.delete_function("sless-1", "a").unwrap());
        assert!(db.get_function("sless-1", "a").unwrap().is_none());
        assert!(!db.code_in_use("abc").unwrap());
    }

    fn trigger(ns: &str, name: &str) -> Trigger {
        let spec = TriggerSpec {
            function: "f".into(),
            trigger_type: TriggerType::Cron,
            schedule: Some("* * * * *".into()),
            payload: None,
            enabled: true,
        };
        super::super::triggers::new_trigger(ns, name, spec)
    }

    #[test]
    fn trigger_rows_round_trip_and_status_updates_keep_the_spec() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open(&tmp.path().join("state.db")).unwrap();
        let t = trigger("sless-1", "t");
        db.insert_trigger(&t).unwrap();
        db.insert_trigger(&trigger("sless-2", "a")).unwrap();
        assert!(matches!(
            db.insert_trigger(&t),
            Err(Error::AlreadyExists {
                kind: "trigger",
                ..
            })
        ));
        assert!(
            db.update_trigger_status("sless-1", "t", |s| s.skipped = 3)
                .unwrap()
        );
        let back = db.get_trigger("sless-1", "t").unwrap().unwrap();
        assert_eq!(back.status.skipped, 3);
        assert_eq!(back.spec, t.spec);
        let mut changed = back.clone();
        changed.spec.enabled = false;
        assert!(db.save_trigger_spec(&changed).unwrap());
        let back = db.get_trigger("sless-1", "t").unwrap().unwrap();
        assert!(!back.spec.enabled);
        assert_eq!(back.status.skipped, 3);
        let in_ns: Vec<_> = db.list_triggers(Some("sless-1")).unwrap();
        assert_eq!(in_ns.len(), 1);
        assert_eq!(db.list_triggers(None).unwrap().len(), 2);
        assert!(db.delete_trigger("sless-1", "t").unwrap());
        assert!(!db.delete_trigger("sless-1", "t").unwrap());
        assert!(
            !db.update_trigger_status("sless-1", "t", |s| s.skipped = 4)
                .unwrap()
        );
        assert!(db.get_trigger("sless-1", "t").unwrap().is_none());
    }

    /// The in-memory trigger specs that route public URLs never answer with
    /// a spec a write replaced: an update, a disable, a delete and a
    /// re-create are each seen by the next read.
    #[test]
    fn cached_trigger_specs_follow_every_write() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open(&tmp.path().join("state.db")).unwrap();
        assert!(db.trigger_spec("sless-1", "t").unwrap().is_none());
        let t = trigger("sless-1", "t");
        db.insert_trigger(&t).unwrap();
        let spec = db.trigger_spec("sless-1", "t").unwrap().unwrap();
        assert!(spec.enabled, "a miss after the insert reads the row");
        assert!(Arc::ptr_eq(
            &spec,
            &db.trigger_spec("sless-1", "t").unwrap().unwrap()
        ));

        let mut changed = t.clone();
        changed.spec.enabled = false;
        changed.spec.function = "g".into();
        assert!(db.save_trigger_spec(&changed).unwrap());
        let spec = db.trigger_spec("sless-1", "t").unwrap().unwrap();
        assert!(!spec.enabled, "the disable is seen at once");
        assert_eq!(spec.function, "g");

        assert!(db.delete_trigger("sless-1", "t").unwrap());
        assert!(
            db.trigger_spec("sless-1", "t").unwrap().is_none(),
            "a deleted trigger's URL stops routing"
        );
        db.insert_trigger(&t).unwrap();
        let spec = db.trigger_spec("sless-1", "t").unwrap().unwrap();
        assert_eq!(spec.function, "f", "a re-created trigger has its new spec");
        assert!(
            db.trigger_spec("sless-2", "t").unwrap().is_none(),
            "namespaces stay apart"
        );
    }

    /// A `state.db` written before the trigger table moved into this module
    /// (created by the triggers' own connection, same columns) opens as it is.
    #[test]
    fn an_older_state_db_with_its_trigger_table_keeps_working() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.db");
        let t = trigger("sless-1", "t");
        {
            // The older operator's file: a schema version and the trigger
            // table as its own connection created it, with one trigger.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version (version) VALUES (1);
                 CREATE TABLE IF NOT EXISTS triggers (namespace TEXT NOT NULL, name TEXT NOT NULL,
                   spec TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL,
                   updated_at TEXT NOT NULL, PRIMARY KEY (namespace, name));",
            )
            .unwrap();
            let (spec, status) = (
                serde_json::to_string(&t.spec).unwrap(),
                serde_json::to_string(&t.status).unwrap(),
            );
            conn.execute(
                "INSERT INTO triggers VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    t.namespace,
                    t.name,
                    spec,
                    status,
                    t.created_at,
                    t.updated_at
                ],
            )
            .unwrap();
        }
        for round in 0..2 {
            let db = Db::open(&path).unwrap();
            assert_eq!(db.get_trigger("sless-1", "t").unwrap().unwrap(), t);
            assert_eq!(db.list_triggers(None).unwrap().len(), 1);
            assert_eq!(db.ensure_namespace("sless-1").unwrap(), round == 0);
            assert!(db.update_trigger_status("sless-1", "t", |_| ()).unwrap());
        }
    }
}
