//! The local backend's state in SQLite (`<data-dir>/state.db`): namespaces,
//! functions (spec and status as JSON columns) and the process groups it
//! started (so a restarted operator can reclaim them). WAL journal with
//! `synchronous=FULL`: a committed write survives a crash or power loss.
//!
//! Queries are short; callers hold the connection mutex only for one query.

use crate::{Error, Result};
use rusqlite::{Connection, OptionalExtension, params};
use sless_wire::function::{FunctionSpec, FunctionStatus};
use sless_wire::{Function, paths};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Current schema version, stored in `schema_version`.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
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
";

/// The state database.
#[derive(Debug)]
pub struct Db {
    conn: Mutex<Connection>,
}

/// The current time as RFC 3339 (seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn json_err(e: serde_json::Error) -> Error {
    Error::Internal(format!("corrupt JSON in the state database: {e}"))
}

fn row_to_function(
    row: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, String, String, String, String, String)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn decode(raw: (String, String, String, String, String, String)) -> Result<Function> {
    let (namespace, name, spec, status, created_at, updated_at) = raw;
    let spec: FunctionSpec = serde_json::from_str(&spec).map_err(json_err)?;
    let mut status: FunctionStatus = serde_json::from_str(&status).map_err(json_err)?;
    status.invoke_path = paths::function_invoke(&namespace, &name);
    Ok(Function {
        namespace,
        name,
        spec,
        status,
        created_at,
        updated_at,
    })
}

const SELECT: &str = "SELECT namespace, name, spec, status, created_at, updated_at FROM functions";

impl Db {
    /// Opens (creating when missing) the database at `path` and migrates it.
    pub fn open(path: &Path) -> Result<Db> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(super::objects::SCHEMA)?;
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
                return Err(Error::Internal(format!(
                    "{} has schema version {v}, newer than this operator's {SCHEMA_VERSION}; \
                     use a newer sless-operator",
                    path.display()
                )));
            }
            Some(_) => {}
        }
        Ok(Db {
            conn: Mutex::new(conn),
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

    /// True when the namespace exists.
    pub fn namespace_exists(&self, ns: &str) -> Result<bool> {
        Ok(self
            .conn()
            .query_row("SELECT 1 FROM namespaces WHERE name = ?1", [ns], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Inserts a new function; `AlreadyExists` when the name is taken.
    pub fn insert_function(&self, f: &Function) -> Result<()> {
        let spec = serde_json::to_string(&f.spec).map_err(json_err)?;
        let status = serde_json::to_string(&f.status).map_err(json_err)?;
        let res = self.conn().execute(
            "INSERT INTO functions (namespace, name, spec, status, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                f.namespace,
                f.name,
                spec,
                status,
                f.created_at,
                f.updated_at
            ],
        );
        match res {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(Error::AlreadyExists {
                    kind: "function",
                    namespace: f.namespace.clone(),
                    name: f.name.clone(),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads one function, `None` when missing.
    pub fn get_function(&self, ns: &str, name: &str) -> Result<Option<Function>> {
        let raw = self
            .conn()
            .query_row(
                &format!("{SELECT} WHERE namespace = ?1 AND name = ?2"),
                params![ns, name],
                row_to_function,
            )
            .optional()?;
        raw.map(decode).transpose()
    }

    /// A namespace's functions sorted by name.
    pub fn list_functions(&self, ns: &str) -> Result<Vec<Function>> {
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare(&format!("{SELECT} WHERE namespace = ?1 ORDER BY name"))?;
            stmt.query_map([ns], row_to_function)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        rows.into_iter().map(decode).collect()
    }

    /// Every function of every namespace.
    pub fn all_functions(&self) -> Result<Vec<Function>> {
        let rows = {
            let conn = self.conn();
            let mut stmt = conn.prepare(&format!("{SELECT} ORDER BY namespace, name"))?;
            stmt.query_map([], row_to_function)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        rows.into_iter().map(decode).collect()
    }

    /// Writes a function's spec, status and `updated_at`; false when it is gone.
    pub fn save_function(&self, f: &Function) -> Result<bool> {
        let spec = serde_json::to_string(&f.spec).map_err(json_err)?;
        let status = serde_json::to_string(&f.status).map_err(json_err)?;
        let n = self.conn().execute(
            "UPDATE functions SET spec = ?3, status = ?4, updated_at = ?5
             WHERE namespace = ?1 AND name = ?2",
            params![f.namespace, f.name, spec, status, f.updated_at],
        )?;
        Ok(n == 1)
    }

    /// Deletes a function; false when it did not exist.
    pub fn delete_function(&self, ns: &str, name: &str) -> Result<bool> {
        let n = self.conn().execute(
            "DELETE FROM functions WHERE namespace = ?1 AND name = ?2",
            params![ns, name],
        )?;
        Ok(n == 1)
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
    use sless_wire::{Phase, Runtime};

    fn function(ns: &str, name: &str) -> Function {
        Function {
            namespace: ns.into(),
            name: name.into(),
            spec: FunctionSpec {
                runtime: Runtime::Python311,
                entrypoint: "main.handler".into(),
                env_vars: Default::default(),
                memory_mb: 128,
                timeout_sec: 30,
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
}
