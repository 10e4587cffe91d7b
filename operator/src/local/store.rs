//! Content-addressed code storage: `<data-dir>/code/<sha256>.zip`, written to
//! a temporary file and renamed, so a reader never sees a partial zip.

use crate::{Error, Result};
use std::io::Write;
use std::path::PathBuf;

/// The code store.
#[derive(Debug, Clone)]
pub struct CodeStore {
    dir: PathBuf,
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl CodeStore {
    /// A store rooted at `dir` (`<data-dir>/code`).
    pub fn new(dir: PathBuf) -> CodeStore {
        CodeStore { dir }
    }

    /// Where the zip with this hash lives.
    pub fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}.zip"))
    }

    /// Stores `zip` under `sha256` (a no-op when it is already there).
    pub fn put(&self, sha256: &str, zip: &[u8]) -> Result<PathBuf> {
        if !is_sha256_hex(sha256) {
            return Err(Error::Internal(format!(
                "not a sha256 hex digest: {sha256:?}"
            )));
        }
        let path = self.path(sha256);
        if path.exists() {
            return Ok(path);
        }
        std::fs::create_dir_all(&self.dir).map_err(Error::io("creating the code store"))?;
        // Unique per call: two uploads of the same code at once (two functions with
        // identical sources in one apply) must not share a temporary file.
        static NEXT_TMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = NEXT_TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!(".{sha256}.{}.{seq}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(zip)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::Io {
                context: format!("storing code {sha256}"),
                source: e,
            }
        })?;
        Ok(path)
    }

    /// Removes the temporary files of writes a crash interrupted (a put
    /// renames its file into place only when it is whole). Call it at start,
    /// while the data dir's lock is held; returns how many were removed.
    pub fn remove_interrupted_writes(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.')
                && name.ends_with(".tmp")
                && std::fs::remove_file(e.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    /// Reads a stored zip.
    pub fn get(&self, sha256: &str) -> Result<Vec<u8>> {
        std::fs::read(self.path(sha256)).map_err(Error::io(format!("reading code {sha256}")))
    }

    /// Removes a stored zip (ignored when missing).
    pub fn remove(&self, sha256: &str) {
        if is_sha256_hex(sha256) {
            let _ = std::fs::remove_file(self.path(sha256));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_puts_of_the_same_code_all_succeed() {
        let tmp = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(CodeStore::new(tmp.path().join("code")));
        let zip = vec![7u8; 256 * 1024];
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&zip));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (store, zip, sha) = (store.clone(), zip.clone(), sha.clone());
                std::thread::spawn(move || store.put(&sha, &zip).map(|_| ()))
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        assert_eq!(store.get(&sha).unwrap(), zip);
        let leftovers = std::fs::read_dir(tmp.path().join("code")).unwrap().count();
        assert_eq!(leftovers, 1, "only the stored zip remains");
    }

    #[test]
    fn interrupted_writes_are_removed_and_whole_zips_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let store = CodeStore::new(tmp.path().join("code"));
        let sha = "a".repeat(64);
        let kept = store.put(&sha, b"whole").unwrap();
        let half = tmp.path().join("code").join(format!(".{sha}.999.0.tmp"));
        std::fs::write(&half, b"hal").unwrap();
        assert_eq!(store.remove_interrupted_writes(), 1);
        assert!(!half.exists());
        assert_eq!(std::fs::read(kept).unwrap(), b"whole");
        assert_eq!(store.remove_interrupted_writes(), 0);
    }

    #[test]
    fn stores_by_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let store = CodeStore::new(tmp.path().join("code"));
        let sha = "a".repeat(64);
        let p = store.put(&sha, b"zipbytes").unwrap();
        assert_eq!(p, tmp.path().join("code").join(format!("{sha}.zip")));
        assert_eq!(store.get(&sha).unwrap(), b"zipbytes");
        assert!(store.put("../evil", b"x").is_err());
        store.remove(&sha);
        assert!(store.get(&sha).is_err());
    }
}
