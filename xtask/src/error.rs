//! The error type of every xtask operation.

use std::path::PathBuf;

/// Everything that can make a release fail, with enough context to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line value is malformed.
    #[error("invalid {field} `{value}`: {reason}")]
    InvalidArgument {
        /// The option or field name, e.g. `--version`.
        field: &'static str,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A filesystem operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "read".
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An external program could not be started.
    #[error("cannot run `{program}` (is it installed and on PATH?): {source}")]
    Spawn {
        /// The program name.
        program: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An external program exited unsuccessfully.
    #[error("`{command}` failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(":\n{stderr}") })]
    CommandFailed {
        /// The command line, for the reader.
        command: String,
        /// The exit status.
        status: String,
        /// What the program printed on stderr (trimmed).
        stderr: String,
    },
    /// A JSON document could not be parsed or has the wrong shape.
    #[error("{} is not a valid {what}: {source}", path.display())]
    Json {
        /// The document's path.
        path: PathBuf,
        /// What the document should be, e.g. "registry manifest".
        what: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A document parsed but a field is wrong.
    #[error("{} is not a valid {what}: {reason}", path.display())]
    InvalidDocument {
        /// The document's path.
        path: PathBuf,
        /// What the document should be.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing or reading a zip archive failed.
    #[error("zip archive {}: {source}", path.display())]
    Zip {
        /// The archive's path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: zip::result::ZipError,
    },
    /// The GPG key was not found in the keyring.
    #[error("GPG key `{key}` not found in the keyring{}", home.as_ref().map(|h| format!(" at {}", h.display())).unwrap_or_default())]
    KeyNotFound {
        /// The key as given on the command line.
        key: String,
        /// The GnuPG home directory, if one was given.
        home: Option<PathBuf>,
    },
    /// The key selector matched several keys.
    #[error("GPG key selector `{key}` matches {count} keys; pass a fingerprint or a 16-hex key id")]
    KeyAmbiguous {
        /// The key as given on the command line.
        key: String,
        /// How many primary keys matched.
        count: usize,
    },
    /// The key is not RSA, so Terraform cannot verify its signatures.
    #[error(
        "GPG key `{key}` signs with {algorithm}; Terraform only verifies RSA signatures \
         (other key types fail at `terraform init` with \"unsupported public key type\"). \
         Create an RSA signing key, e.g. `gpg --full-generate-key` and choose \"RSA (sign only)\", 3072 or 4096 bits"
    )]
    UnsupportedKeyAlgorithm {
        /// The key as given on the command line.
        key: String,
        /// A readable name of the algorithm, e.g. "EdDSA (algorithm 22)".
        algorithm: String,
    },
    /// The key has no usable signing capability or no secret part here.
    #[error("GPG key `{key}` cannot sign: {reason}")]
    CannotSign {
        /// The key as given on the command line.
        key: String,
        /// Why.
        reason: String,
    },
    /// No platform could be built.
    #[error("no target to build: {0}")]
    NoTargets(String),
    /// The release output failed its own checks.
    #[error("release output failed verification:\n{}", problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Verification {
        /// Every problem found.
        problems: Vec<String>,
    },
}

/// Shorthand for results of xtask operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Builds an [`Error::Io`] from an action and a path; use with `map_err`.
pub fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}
