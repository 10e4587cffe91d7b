//! The embedded local backend (being built; see issue 2).

use std::path::PathBuf;

/// Options of the local backend.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Root of all state: database, code, builds, logs.
    pub data_dir: PathBuf,
}

/// The local backend.
pub struct LocalBackend {
    _opts: LocalOptions,
}

impl LocalBackend {
    /// Opens the database under the data dir, reclaims anything a crash left
    /// behind, and brings every Ready function back.
    pub async fn start(opts: LocalOptions) -> crate::Result<LocalBackend> {
        Err(crate::Error::Unsupported(format!(
            "local backend not built yet ({})",
            opts.data_dir.display()
        )))
    }
}
