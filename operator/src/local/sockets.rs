//! Unix sockets of unsandboxed function processes (`--isolation none`).
//!
//! Sandboxed, a function serves on its sandbox's unix socket (`sandbox.rs`).
//! Unsandboxed it used to serve on a loopback TCP port, which every local
//! user could call without a token. Now each serving process of a function gets a
//! socket of its own, `<data-dir>/run/sockets/<n>.sock`, in a directory only
//! the operator's user may enter (0700): its path goes to the process as
//! `SLESS_SOCKET` when it is spawned (or, for a warm Node process, when it is
//! assigned), and the file is removed when the process is let go. A path
//! that would not fit a `sockaddr_un` leaves the process on loopback TCP.
//! Services keep their `$PORT` (the user's own server listens there).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The longest path a `sockaddr_un` takes (108 bytes with the NUL).
const MAX_PATH: usize = 107;

/// Hands out socket paths in one directory, each once.
#[derive(Debug)]
pub struct HostSockets {
    dir: PathBuf,
    next: AtomicU64,
}

impl HostSockets {
    /// Creates `dir` empty, readable by the operator's user only. `None`
    /// (with a warning) when that fails or when its socket paths would be
    /// too long for a unix socket: processes then serve on loopback TCP.
    pub fn create(dir: &Path) -> Option<HostSockets> {
        let sockets = HostSockets {
            dir: dir.to_path_buf(),
            next: AtomicU64::new(0),
        };
        // The longest name a long-running operator would hand out.
        if sockets.path_of(u64::MAX).as_os_str().len() > MAX_PATH {
            tracing::warn!(
                dir = %dir.display(),
                "the data dir's path is too long for unix sockets: unsandboxed functions serve on loopback TCP"
            );
            return None;
        }
        let made = std::fs::remove_dir_all(dir)
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            })
            .and_then(|()| std::fs::create_dir_all(dir))
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            });
        match made {
            Ok(()) => Some(sockets),
            Err(e) => {
                tracing::warn!(
                    dir = %dir.display(),
                    error = %e,
                    "cannot create the socket dir: unsandboxed functions serve on loopback TCP"
                );
                None
            }
        }
    }

    /// A path no other process of this operator has been given.
    pub fn allocate(&self) -> SocketFile {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        SocketFile(self.path_of(n))
    }

    fn path_of(&self, n: u64) -> PathBuf {
        self.dir.join(format!("{n}.sock"))
    }
}

/// One process's socket path; the file is removed when this is dropped
/// (the process is gone or let go by then).
#[derive(Debug)]
pub struct SocketFile(PathBuf);

impl SocketFile {
    /// Where the process listens.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `env` with `SLESS_SOCKET` set to `path` (replaced if present).
pub fn with_socket(env: &[(String, String)], path: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| k != "SLESS_SOCKET")
        .cloned()
        .collect();
    env.push((
        "SLESS_SOCKET".to_string(),
        path.to_string_lossy().into_owned(),
    ));
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn paths_are_unique_private_and_removed_when_let_go() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run/sockets");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("7.sock"), b"left by a previous operator").unwrap();
        let sockets = HostSockets::create(&dir).expect("a short path");
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(!dir.join("7.sock").exists(), "emptied at start");
        let (a, b) = (sockets.allocate(), sockets.allocate());
        assert_ne!(a.path(), b.path());
        let listener = std::os::unix::net::UnixListener::bind(a.path()).unwrap();
        assert!(a.path().exists());
        drop(a);
        drop(listener);
        assert!(!dir.join("0.sock").exists(), "removed when let go");
    }

    #[test]
    fn a_path_too_long_for_a_unix_socket_means_tcp() {
        let long = Path::new("/tmp").join("x".repeat(100));
        assert!(HostSockets::create(&long).is_none());
        assert!(!long.exists());
    }

    #[test]
    fn the_socket_variable_is_set_once() {
        let env = vec![
            ("A".to_string(), "1".to_string()),
            ("SLESS_SOCKET".to_string(), "/old".to_string()),
        ];
        let env = with_socket(&env, Path::new("/run/x/3.sock"));
        let sockets: Vec<_> = env.iter().filter(|(k, _)| k == "SLESS_SOCKET").collect();
        assert_eq!(sockets.len(), 1);
        assert_eq!(sockets[0].1, "/run/x/3.sock");
        assert!(env.contains(&("A".to_string(), "1".to_string())));
    }
}
