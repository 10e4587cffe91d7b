//! The REST API: routes, handlers, auth extraction, error mapping, OpenAPI
//! document, the invoke reverse proxy, and the HTTP server around them.
//!
//! - [`router`]: the route table and fallbacks.
//! - [`extract`]: the authenticated [`extract::Caller`] (401/403), path names,
//!   JSON bodies and query strings.
//! - [`error`]: `crate::Error` → status + `ErrorBody`, in one place.
//! - [`namespaces`], [`functions`], [`code`], [`logs`], [`invoke`],
//!   [`invocations`] (the invocation log): handlers.
//! - [`funcs`]: the HTML page of a namespace (`/funcs/{ns}`, `/funcs?token=`).
//! - [`proxy`]: the reusable streaming reverse proxy; [`proxy_body`] its
//!   body wrappers, [`upstream`] its pooled client to function servers.
//! - [`openapi`]: the generated OpenAPI document.
//! - [`metrics`]: `/metrics` (Prometheus text format, no auth).
//! - [`server`]: `sless-operator serve`: bind, serve, shut down gracefully.

pub mod code;
pub mod error;
pub mod extract;
pub mod funcs;
pub mod functions;
pub mod invocations;
pub mod invoke;
pub mod jobs;
pub mod logs;
pub mod metrics;
pub mod namespaces;
pub mod openapi;
pub mod proxy;
pub mod proxy_body;
pub mod public;
pub mod public_services;
pub mod router;
pub mod server;
pub mod services;
pub mod triggers;
pub mod upstream;

use crate::auth::Verifier;
use crate::backend::Backend;
use std::sync::Arc;

pub use router::router;

/// What every handler gets: the backend, the token verifier, the proxy's
/// HTTP client and the operator's public base URL.
#[derive(Clone)]
pub struct AppState {
    /// The engine that stores, builds and runs functions.
    pub backend: Arc<dyn Backend>,
    /// Verifies bearer tokens.
    pub auth: Arc<Verifier>,
    /// The shared HTTP client (connection pool) of the invoke proxy.
    pub proxy: upstream::Upstream,
    /// Base URL used in returned URLs, without a trailing `/`.
    pub public_url: Arc<str>,
}
