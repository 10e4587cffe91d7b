//! Per-function build and run logs, bounded by rotation:
//! `<data-dir>/logs/<ns>/<name>/{build,run}.log`, and when one would grow past
//! its limit it is renamed to `.1` (replacing the previous `.1`).

use sless_wire::function::LogKind;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The log files of all functions.
#[derive(Debug)]
pub struct Logs {
    root: PathBuf,
    max_bytes: u64,
    /// Held by every write; it guards the set of deleted objects' log dirs,
    /// which late writers (a stopped process's last lines, an unpack
    /// finishing in the background) must not create again.
    write_lock: Mutex<HashSet<PathBuf>>,
}

fn file_name(kind: LogKind) -> &'static str {
    match kind {
        LogKind::Build => "build.log",
        LogKind::Run => "run.log",
    }
}

impl Logs {
    /// Logs under `root` (`<data-dir>/logs`), each at most `max_bytes` before rotation.
    pub fn new(root: PathBuf, max_bytes: u64) -> Logs {
        Logs {
            root,
            max_bytes: max_bytes.max(1024),
            write_lock: Mutex::new(HashSet::new()),
        }
    }

    /// The directory of one function's logs.
    pub fn dir(&self, ns: &str, name: &str) -> PathBuf {
        self.root.join(ns).join(name)
    }

    /// The current file of one log.
    pub fn path(&self, ns: &str, name: &str, kind: LogKind) -> PathBuf {
        self.dir(ns, name).join(file_name(kind))
    }

    /// Appends `text` (a newline is added when missing). Errors are reported
    /// through `tracing` only: logging must never fail a build or a function.
    pub fn append(&self, ns: &str, name: &str, kind: LogKind, text: &str) {
        let path = self.path(ns, name, kind);
        let deleted = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        if deleted.contains(&self.dir(ns, name)) {
            return;
        }
        if let Err(e) = self.append_locked(&path, text) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write function log");
        }
    }

    fn append_locked(&self, path: &Path, text: &str) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut data = text.as_bytes().to_vec();
        if !data.ends_with(b"\n") {
            data.push(b'\n');
        }
        // A single oversized write keeps only its tail.
        if data.len() as u64 > self.max_bytes {
            let cut = data.len() - self.max_bytes as usize;
            data.drain(..cut);
        }
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if len > 0 && len + data.len() as u64 > self.max_bytes {
            std::fs::rename(path, rotated(path))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.write_all(&data)
    }

    /// Starts a new generation of a log: the current file becomes `.1`.
    pub fn rotate(&self, ns: &str, name: &str, kind: LogKind) {
        let path = self.path(ns, name, kind);
        let deleted = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        if !deleted.contains(&self.dir(ns, name))
            && path.exists()
            && let Err(e) = std::fs::rename(&path, rotated(&path))
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot rotate function log");
        }
    }

    /// Reads a log (the current file), optionally only its last `tail` lines.
    /// A log that does not exist yet reads as empty.
    pub fn read(&self, ns: &str, name: &str, kind: LogKind, tail: Option<usize>) -> String {
        let path = self.path(ns, name, kind);
        let bytes = std::fs::read(&path).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        match tail {
            None => text.into_owned(),
            Some(n) => tail_lines(&text, n),
        }
    }

    /// Removes a function's logs.
    pub fn remove(&self, ns: &str, name: &str) {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = std::fs::remove_dir_all(self.dir(ns, name));
    }

    /// Removes a deleted object's logs and drops every later write to them
    /// until [`Logs::revive`] (an object of that name is created again).
    pub fn remove_for_good(&self, ns: &str, name: &str) {
        let mut deleted = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let dir = self.dir(ns, name);
        let _ = std::fs::remove_dir_all(&dir);
        deleted.insert(dir);
    }

    /// Lets writes to `ns/name`'s logs through again after
    /// [`Logs::remove_for_good`].
    pub fn revive(&self, ns: &str, name: &str) {
        let mut deleted = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        deleted.remove(&self.dir(ns, name));
    }
}

fn rotated(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".1");
    PathBuf::from(s)
}

/// The last `n` lines of `text` (each with its newline).
pub fn tail_lines(text: &str, n: usize) -> String {
    if n == 0 {
        return String::new();
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    lines[lines.len().saturating_sub(n)..].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_takes_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(tail_lines("a\nb\nc", 1), "c");
        assert_eq!(tail_lines("a\n", 5), "a\n");
        assert_eq!(tail_lines("a\n", 0), "");
    }

    #[test]
    fn logs_are_bounded_by_rotation() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = Logs::new(tmp.path().to_path_buf(), 4096);
        let line = "x".repeat(99);
        for i in 0..1000 {
            logs.append("ns", "f", LogKind::Run, &format!("{i:04} {line}"));
        }
        let cur = logs.path("ns", "f", LogKind::Run);
        let len = std::fs::metadata(&cur).unwrap().len();
        let old = std::fs::metadata(rotated(&cur)).unwrap().len();
        assert!(len <= 4096 && old <= 4096, "{len} {old}");
        let text = logs.read("ns", "f", LogKind::Run, Some(1));
        assert!(text.starts_with("0999 "), "{text}");
        // Build and run logs are separate; a missing log is empty.
        assert_eq!(logs.read("ns", "f", LogKind::Build, None), "");
        logs.remove("ns", "f");
        assert!(!logs.dir("ns", "f").exists());
    }

    #[test]
    fn late_writes_after_a_delete_do_not_bring_the_logs_back() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = Logs::new(tmp.path().to_path_buf(), 4096);
        logs.append("ns", "f", LogKind::Run, "before");
        logs.remove_for_good("ns", "f");
        logs.append("ns", "f", LogKind::Run, "a stopped process's last line");
        logs.rotate("ns", "f", LogKind::Build);
        logs.append("ns", "other", LogKind::Run, "unaffected");
        assert!(!logs.dir("ns", "f").exists());
        assert!(logs.dir("ns", "other").exists());
        logs.revive("ns", "f");
        logs.append("ns", "f", LogKind::Run, "created again");
        assert_eq!(logs.read("ns", "f", LogKind::Run, None), "created again\n");
    }

    #[test]
    fn an_oversized_write_keeps_its_tail() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = Logs::new(tmp.path().to_path_buf(), 1024);
        let big = format!("{}END", "y".repeat(5000));
        logs.append("ns", "f", LogKind::Build, &big);
        let text = logs.read("ns", "f", LogKind::Build, None);
        assert!(text.len() <= 1024 && text.ends_with("END\n"));
    }
}
