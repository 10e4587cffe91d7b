//! The Python and Node.js runtime servers, embedded in the binary and written
//! to `<data-dir>/runtimes/` at start (always overwritten, so an upgraded
//! operator never runs stale copies). The protocol they speak is in
//! `docs/runtime-protocol.md`.

use sless_wire::runtime::Language;
use std::path::{Path, PathBuf};

/// `server.py`, the Python runtime server (standard library only).
pub const SERVER_PY: &str = include_str!("../runtimes/server.py");
/// `server.js`, the Node.js runtime server (no dependencies).
pub const SERVER_JS: &str = include_str!("../runtimes/server.js");

/// `zygote.py`, the pre-imported Python runtime that forks cold starts.
pub const ZYGOTE_PY: &str = include_str!("../runtimes/zygote.py");

/// Name of the directory under the data dir that holds the runtime servers.
pub const RUNTIMES_DIR: &str = "runtimes";

/// Paths of the runtime servers written by [`install`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimePaths {
    /// The directory holding both servers.
    pub dir: PathBuf,
    /// `server.py`.
    pub python: PathBuf,
    /// `server.js`.
    pub node: PathBuf,
    /// `zygote.py`.
    pub zygote_py: PathBuf,
}

impl RuntimePaths {
    /// The server script for a language.
    pub fn server_for(&self, language: Language) -> &Path {
        match language {
            Language::Python => &self.python,
            Language::Node => &self.node,
        }
    }
}

/// Writes both servers to `<data_dir>/runtimes/` (tmp file + rename each).
pub fn install(data_dir: &Path) -> std::io::Result<RuntimePaths> {
    use std::os::unix::fs::PermissionsExt;
    let dir = data_dir.join(RUNTIMES_DIR);
    std::fs::create_dir_all(&dir)?;
    let python = dir.join("server.py");
    let node = dir.join("server.js");
    let zygote_py = dir.join("zygote.py");
    for (path, text) in [
        (&python, SERVER_PY),
        (&node, SERVER_JS),
        (&zygote_py, ZYGOTE_PY),
    ] {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        // Readable by sandboxed user processes whatever the umask.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&tmp, path)?;
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(RuntimePaths {
        dir,
        python,
        node,
        zygote_py,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_overwrites_stale_copies() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(RUNTIMES_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("server.py"), "stale").unwrap();
        let paths = install(tmp.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&paths.python).unwrap(), SERVER_PY);
        assert_eq!(std::fs::read_to_string(&paths.node).unwrap(), SERVER_JS);
        assert_eq!(
            std::fs::read_to_string(&paths.zygote_py).unwrap(),
            ZYGOTE_PY
        );
        assert_eq!(paths.server_for(Language::Node), paths.node.as_path());
    }
}
