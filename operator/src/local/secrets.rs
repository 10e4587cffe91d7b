//! Secret env values of the local backend: one JSON file per object,
//! `<data-dir>/secrets/<ns>/<id>.json`, mode 0600 in 0700 folders, replaced
//! atomically. The database rows hold only the names and the hash
//! ([`SecretEnv`]); the values are read when a process is launched.

use sless_wire::SecretEnv;
use sless_wire::secret::secret_hash;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the secrets of an object cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// The file or its folder could not be written or read.
    #[error("{context} {}: {source}", path.display())]
    Io {
        context: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not the JSON map this module writes.
    #[error("secrets file {} is damaged: {source}", path.display())]
    Damaged {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The values on disk are not the ones the spec records.
    #[error(
        "the stored secret_env_vars of {id} do not match the recorded hash: set secret_env_vars again"
    )]
    Mismatch { id: String },
}

fn path_of(data_dir: &Path, ns: &str, id: &str) -> PathBuf {
    data_dir.join("secrets").join(ns).join(format!("{id}.json"))
}

fn io(context: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SecretsError {
    let path = path.to_path_buf();
    move |source| SecretsError::Io {
        context,
        path,
        source,
    }
}

/// Writes the values `s` carries (nothing when it carries none; the file
/// is removed when there are no secrets).
pub fn store(data_dir: &Path, ns: &str, id: &str, s: &SecretEnv) -> Result<(), SecretsError> {
    let Some(values) = &s.values else {
        return Ok(());
    };
    let path = path_of(data_dir, ns, id);
    if values.is_empty() {
        return remove(data_dir, ns, id);
    }
    let dir = path.parent().unwrap_or(data_dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("creating", dir))?;
    for d in [dir, dir.parent().unwrap_or(dir)] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
            .map_err(io("restricting", d))?;
    }
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(values).map_err(|source| SecretsError::Damaged {
        path: tmp.clone(),
        source,
    })?;
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("creating", &tmp))?;
    f.write_all(&body).map_err(io("writing", &tmp))?;
    f.sync_all().map_err(io("syncing", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("renaming into", &path))?;
    Ok(())
}

/// The values of `id`, checked against the hash `s` records; empty when
/// it records no secrets.
pub fn load(
    data_dir: &Path,
    ns: &str,
    id: &str,
    s: &SecretEnv,
) -> Result<BTreeMap<String, String>, SecretsError> {
    if s.is_empty() {
        return Ok(BTreeMap::new());
    }
    let path = path_of(data_dir, ns, id);
    let body = std::fs::read(&path).map_err(io("reading", &path))?;
    let values: BTreeMap<String, String> =
        serde_json::from_slice(&body).map_err(|source| SecretsError::Damaged {
            path: path.clone(),
            source,
        })?;
    if secret_hash(&values) != s.hash {
        return Err(SecretsError::Mismatch { id: id.to_string() });
    }
    Ok(values)
}

/// Removes the secrets of `id` (nothing when there are none).
pub fn remove(data_dir: &Path, ns: &str, id: &str) -> Result<(), SecretsError> {
    let path = path_of(data_dir, ns, id);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", &path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_0600_loaded_checked_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let values: BTreeMap<String, String> =
            [("TOKEN".to_string(), "hunter2".to_string())].into();
        let s = SecretEnv::from_values(&values);
        store(d.path(), "sless-1", "fn", &s).unwrap();
        let path = path_of(d.path(), "sless-1", "fn");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        assert_eq!(load(d.path(), "sless-1", "fn", &s).unwrap(), values);
        // A spec without values (read back from the database) writes nothing.
        store(d.path(), "sless-1", "fn", &s.without_values()).unwrap();
        assert_eq!(load(d.path(), "sless-1", "fn", &s).unwrap(), values);
        // Another hash: refused, never launched with the wrong values.
        let other = SecretEnv::from_values(&[("TOKEN".to_string(), "x".to_string())].into());
        assert!(matches!(
            load(d.path(), "sless-1", "fn", &other),
            Err(SecretsError::Mismatch { .. })
        ));
        // No secrets: the file goes.
        store(
            d.path(),
            "sless-1",
            "fn",
            &SecretEnv::from_values(&BTreeMap::new()),
        )
        .unwrap();
        assert!(!path.exists());
        remove(d.path(), "sless-1", "fn").unwrap();
    }
}
