//! The error type of the benchmark command.

use std::path::PathBuf;

/// Everything that can stop a benchmark section, with enough context to fix it.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A filesystem operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "write".
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An external program failed or could not be started.
    #[error(transparent)]
    Command(#[from] crate::Error),
    /// A required tool is not installed.
    #[error("`{tool}` is not installed: {hint}")]
    MissingTool {
        /// The program name.
        tool: &'static str,
        /// How to install it.
        hint: String,
    },
    /// Talking to the operator over HTTP failed.
    #[error("HTTP {method} {path}: {reason}")]
    Http {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
        /// What went wrong (connection error or unexpected status with body).
        reason: String,
    },
    /// The provider's source code path failed.
    #[error("provider source path on {}: {source}", path.display())]
    Source {
        /// The folder being read.
        path: PathBuf,
        /// The provider's error.
        #[source]
        source: terraform_provider_sless::source::SourceError,
    },
    /// A tool printed something the benchmark cannot interpret.
    #[error("cannot parse the output of {tool}: {reason}")]
    Parse {
        /// The tool, e.g. `wrk`.
        tool: &'static str,
        /// What was missing or malformed.
        reason: String,
    },
    /// Something the benchmark waited for did not happen in time.
    #[error("timed out after {secs}s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        secs: u64,
    },
    /// A measured run went wrong in a way that invalidates it (non-2xx answers, a
    /// function that failed to build, a plan that was not empty).
    #[error("{0}")]
    RunFailed(String),
}

/// Shorthand for results of benchmark operations.
pub type Result<T> = std::result::Result<T, BenchError>;

/// Builds a [`BenchError::Io`] from an action and a path; use with `map_err`.
pub fn io(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.into();
    move |source| BenchError::Io {
        action,
        path,
        source,
    }
}
