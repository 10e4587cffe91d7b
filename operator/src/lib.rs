//! `sless-operator`: the REST API the Terraform provider drives, over one of
//! two backends behind the [`backend::Backend`] trait.
//!
//! Map of the crate (see ARCHITECTURE.md for the path of a request):
//! - [`config`]: command-line options of `serve` and `token`.
//! - [`api`]: the axum router, handlers, auth middleware, OpenAPI document and
//!   the invoke reverse proxy. Handlers validate input and call the backend.
//! - [`auth`]: JWT verification (local HS256 key, JWKS for RS256/ES256) and
//!   token minting for `sless-operator token`.
//! - [`backend`]: the `Backend` trait every engine implements.
//! - [`codezip`]: safe inspection and extraction of uploaded code zips.
//! - [`invocations`]: the invocation log (`<data-dir>/invocations.db`) the
//!   invoke proxy records every call in.
//! - [`local`]: the embedded backend: SQLite state, builds, supervised processes.
//! - [`runtimes`]: the Python and Node.js runtime servers embedded in the binary.

pub mod api;
pub mod auth;
pub mod backend;
pub mod codezip;
pub mod config;
pub mod invocations;
pub mod kube;
pub mod local;
pub mod runtimes;
pub mod token_cache;

use sless_wire::FieldError;

/// Every error an operation can end in. The API maps each variant to one
/// HTTP status (see `api::error`); input errors are always 4xx.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request field breaks a rule (400).
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The request is malformed in a way no single field explains (400).
    #[error("{0}")]
    BadRequest(String),
    /// The uploaded code zip is unsafe or unreadable (400).
    #[error("invalid code zip: {0}")]
    BadZip(#[from] codezip::ZipError),
    /// No such object (404).
    #[error("{kind} {name:?} not found in namespace {namespace}")]
    NotFound {
        /// `function`, `namespace`, ...
        kind: &'static str,
        /// The namespace looked in.
        namespace: String,
        /// The missing object's name.
        name: String,
    },
    /// An object with this name exists (409).
    #[error("{kind} {name:?} already exists in namespace {namespace}")]
    AlreadyExists {
        /// `function`, ...
        kind: &'static str,
        /// The namespace.
        namespace: String,
        /// The clashing name.
        name: String,
    },
    /// The object's state forbids the operation, e.g. it is being deleted (409).
    #[error("{0}")]
    Conflict(String),
    /// A body over its size limit (413).
    #[error("{what} is {size} bytes, the limit is {limit} bytes")]
    PayloadTooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size (or a lower bound when it was cut off).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The function cannot serve right now (503), with what it is doing.
    #[error("{0}")]
    NotReady(String),
    /// The backend does not support this (501).
    #[error("{0}")]
    Unsupported(String),
    /// A storage fault (500): never caused by input.
    #[error("storage error: {0}")]
    Storage(#[from] rusqlite::Error),
    /// A file system fault (500), with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What the operator was doing.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The state database cannot be opened or used as one (500; at start it
    /// stops the operator), with the file and what to do about it.
    #[error("{0}")]
    StateDatabase(String),
    /// Any other internal fault (500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    /// A missing function.
    pub fn function_not_found(namespace: &str, name: &str) -> Error {
        Error::NotFound {
            kind: "function",
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// Result with the operator's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
