//! Jobs and services in the state database: one row per object in the
//! `objects` table, keyed by kind, namespace and name, with the whole object
//! (spec and status) as a JSON document (the table is created in
//! [`super::db`]). Functions and triggers keep their own tables.

use super::db::{Db, name_taken};
use crate::{Error, Result};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sless_wire::{Job, Service};

/// An object kept in the `objects` table.
pub trait Stored: Serialize + DeserializeOwned {
    /// The kind, as used in the table and in error messages (`job`, `service`).
    const KIND: &'static str;
    /// Its namespace.
    fn namespace(&self) -> &str;
    /// Its name.
    fn name(&self) -> &str;
}

/// `impl Stored` for a wire type with `namespace` and `name` fields.
macro_rules! stored {
    ($ty:ident as $kind:literal) => {
        impl Stored for $ty {
            const KIND: &'static str = $kind;
            fn namespace(&self) -> &str {
                &self.namespace
            }
            fn name(&self) -> &str {
                &self.name
            }
        }
    };
}

stored!(Job as "job");
stored!(Service as "service");

fn encode<T: Stored>(o: &T) -> Result<String> {
    serde_json::to_string(o).map_err(|e| Error::Internal(format!("encoding a {}: {e}", T::KIND)))
}

fn decode<T: Stored>(doc: &str) -> Result<T> {
    serde_json::from_str(doc)
        .map_err(|e| Error::Internal(format!("corrupt {} in the state database: {e}", T::KIND)))
}

/// The `NotFound` error of a missing object of kind `T`.
pub fn not_found<T: Stored>(ns: &str, name: &str) -> Error {
    Error::NotFound {
        kind: T::KIND,
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

impl Db {
    /// Inserts a new object; `AlreadyExists` when the name is taken.
    pub fn insert_object<T: Stored>(&self, o: &T) -> Result<()> {
        let doc = encode(o)?;
        let res = self.conn().execute(
            "INSERT INTO objects (kind, namespace, name, doc) VALUES (?1, ?2, ?3, ?4)",
            params![T::KIND, o.namespace(), o.name(), doc],
        );
        name_taken(res, T::KIND, o.namespace(), o.name())
    }

    /// Reads one object, `None` when missing.
    pub fn get_object<T: Stored>(&self, ns: &str, name: &str) -> Result<Option<T>> {
        let doc: Option<String> = self
            .conn()
            .query_row(
                "SELECT doc FROM objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3",
                params![T::KIND, ns, name],
                |r| r.get(0),
            )
            .optional()?;
        doc.as_deref().map(decode).transpose()
    }

    /// Reads one object; `NotFound` when missing.
    pub fn object<T: Stored>(&self, ns: &str, name: &str) -> Result<T> {
        self.get_object(ns, name)?
            .ok_or_else(|| not_found::<T>(ns, name))
    }

    /// Changes a stored object in one read-modify-write, unless `f` returns
    /// false. False when nothing was written: the object is gone, `f` said
    /// no, or the database failed (logged).
    pub fn modify_object<T: Stored>(
        &self,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut T) -> bool,
    ) -> bool {
        let mut o = match self.get_object::<T>(ns, name) {
            Ok(Some(o)) => o,
            Ok(None) => return false,
            Err(e) => {
                tracing::error!(error = %e, "cannot read {}", T::KIND);
                return false;
            }
        };
        f(&mut o)
            && self.save_object(&o).unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot save {} status", T::KIND);
                false
            })
    }

    /// Objects of one namespace (or of all, with `None`), sorted by name.
    pub fn list_objects<T: Stored>(&self, ns: Option<&str>) -> Result<Vec<T>> {
        let docs = {
            let conn = self.conn();
            let mut stmt = conn.prepare(
                "SELECT doc FROM objects WHERE kind = ?1 AND (?2 IS NULL OR namespace = ?2)
                 ORDER BY namespace, name",
            )?;
            stmt.query_map(params![T::KIND, ns], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        docs.iter().map(|d| decode(d)).collect()
    }

    /// Writes an object; false when it is gone.
    pub fn save_object<T: Stored>(&self, o: &T) -> Result<bool> {
        let doc = encode(o)?;
        let n = self.conn().execute(
            "UPDATE objects SET doc = ?4 WHERE kind = ?1 AND namespace = ?2 AND name = ?3",
            params![T::KIND, o.namespace(), o.name(), doc],
        )?;
        Ok(n == 1)
    }

    /// Deletes an object; false when it did not exist.
    pub fn delete_object<T: Stored>(&self, ns: &str, name: &str) -> Result<bool> {
        let n = self.conn().execute(
            "DELETE FROM objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3",
            params![T::KIND, ns, name],
        )?;
        Ok(n == 1)
    }

    /// True when any job's or service's status names this code.
    pub fn object_code_in_use(&self, sha256: &str) -> Result<bool> {
        Ok(self
            .conn()
            .query_row(
                "SELECT 1 FROM objects WHERE json_extract(doc, '$.status.code_sha256') = ?1 LIMIT 1",
                [sha256],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sless_wire::job::JobSpec;

    fn job(ns: &str, name: &str) -> Job {
        let spec = JobSpec {
            runtime: sless_wire::Runtime::Python311,
            entrypoint: "main.handler".into(),
            env_vars: Default::default(),
            secret_env_vars: Default::default(),
            input: "{}".into(),
            run_id: 0,
            memory_mb: 128,
            timeout_sec: 30,
        };
        super::super::jobs::new_job(ns, name, spec)
    }

    #[test]
    fn objects_are_found_modified_only_when_asked_and_missing_is_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open(&tmp.path().join("state.db")).unwrap();
        db.ensure_namespace("sless-1").unwrap();
        db.insert_object(&job("sless-1", "j")).unwrap();
        assert!(matches!(
            db.insert_object(&job("sless-1", "j")),
            Err(Error::AlreadyExists { kind: "job", .. })
        ));
        assert!(db.modify_object::<Job>("sless-1", "j", |j| {
            j.status.code_sha256 = Some("abc".into());
            true
        }));
        assert!(!db.modify_object::<Job>("sless-1", "j", |j| {
            j.generation = 9;
            false
        }));
        let back = db.object::<Job>("sless-1", "j").unwrap();
        assert_eq!(
            (back.generation, back.status.code_sha256.as_deref()),
            (1, Some("abc"))
        );
        assert!(db.object_code_in_use("abc").unwrap());
        assert!(!db.modify_object::<Job>("sless-1", "gone", |_| true));
        assert!(matches!(
            db.object::<Job>("sless-1", "gone"),
            Err(Error::NotFound { kind: "job", .. })
        ));
        assert!(db.get_object::<Service>("sless-1", "j").unwrap().is_none());
    }
}
