//! `sless-operator serve`: bind, start the backend, serve the API, and shut
//! down gracefully on SIGTERM/SIGINT (stop accepting, let in-flight requests
//! finish for a while, stop the backend's processes).

use super::{AppState, router, upstream};
use crate::auth::{SetupError, Verifier};
use crate::backend::Backend;
use crate::config::{BackendKind, ServeArgs};
use crate::local::{LocalBackend, LocalOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// File in the data dir that holds the bound address `IP:PORT`.
pub const ADDR_FILE: &str = "operator.addr";
/// How long in-flight requests may run after a shutdown signal.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why `serve` could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The Kubernetes backend's options are incomplete or wrong.
    #[error("{0}")]
    KubeOptions(String),
    /// A file system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Auth could not be set up (key file, JWKS).
    #[error("auth setup: {0}")]
    Auth(#[from] SetupError),
    /// The backend failed to start.
    #[error("backend: {0}")]
    Backend(#[from] crate::Error),
    /// `--public-url` is not an http(s) URL.
    #[error("--public-url {0:?} must start with http:// or https://")]
    PublicUrl(String),
    /// The server task failed.
    #[error("server: {0}")]
    Server(String),
    /// The invocation log could not be opened.
    #[error(transparent)]
    Invocations(#[from] crate::invocations::InvocationLogError),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServeError {
    let context = context.into();
    move |source| ServeError::Io { context, source }
}

/// Runs the operator until SIGTERM/SIGINT.
pub async fn serve(args: ServeArgs) -> Result<(), ServeError> {
    let kube_options = match args.backend {
        BackendKind::Kube => Some(args.kube.to_options().map_err(ServeError::KubeOptions)?),
        BackendKind::Local => None,
    };
    if let Some(url) = &args.public_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ServeError::PublicUrl(url.clone()));
    }
    std::fs::create_dir_all(&args.data_dir).map_err(io_err(format!(
        "creating data dir {}",
        args.data_dir.display()
    )))?;
    let data_dir = std::fs::canonicalize(&args.data_dir).map_err(io_err(format!(
        "resolving data dir {}",
        args.data_dir.display()
    )))?;

    let auth = Verifier::from_args(&args.auth, &data_dir).await?;
    tracing::info!(
        local_tokens = auth.accepts_local_tokens(),
        jwks = args.auth.jwks_file.is_some() || args.auth.jwks_url.is_some(),
        issuer = args.auth.issuer.as_deref().unwrap_or("-"),
        audience = args.auth.audience.as_deref().unwrap_or("-"),
        "auth configured"
    );

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(io_err(format!("binding {}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(io_err("reading the bound address"))?;

    // Before the backend: cron runs of the local backend record into it.
    let invocations =
        crate::invocations::InvocationLog::open(&data_dir, crate::invocations::KEEP_PER_NAMESPACE)?;
    if !crate::invocations::install(invocations.clone()) {
        tracing::warn!("an invocation log was already installed in this process; keeping it");
    }
    let backend = start_backend(&data_dir, kube_options, &args.sandbox).await?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let state = AppState {
        backend: backend.clone(),
        auth: Arc::new(auth),
        proxy: upstream::Upstream::tcp(),
        public_url: public_url.trim_end_matches('/').into(),
    };
    let app = router(state);

    let addr_file = data_dir.join(ADDR_FILE);
    write_atomically(&addr_file, format!("{addr}\n").as_bytes())
        .map_err(io_err(format!("writing {}", addr_file.display())))?;
    tracing::info!(%addr, %public_url, data_dir = %data_dir.display(), "sless-operator listening");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let limits = ConnLimits::from_args(&args.http);
    raise_fd_limit(limits.max_connections);
    tracing::info!(
        header_read_timeout_sec = limits.header_read_timeout.as_secs(),
        max_connections = limits.max_connections,
        "HTTP server limits"
    );
    let server = run_http(listener, app, limits, async {
        let _ = stop_rx.await;
    });
    let mut server = tokio::spawn(server);

    let early = tokio::select! {
        signal = shutdown_signal() => {
            tracing::info!(%signal, "shutting down: no new connections");
            None
        }
        res = &mut server => Some(res),
    };
    let result = match early {
        Some(res) => Err(ServeError::Server(match res {
            Ok(()) => "the server stopped unexpectedly".to_string(),
            Err(e) => e.to_string(),
        })),
        None => {
            let _ = stop_tx.send(());
            match tokio::time::timeout(DRAIN_TIMEOUT, &mut server).await {
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(
                        "requests still running after {DRAIN_TIMEOUT:?}; closing their connections"
                    );
                    server.abort();
                }
            }
            Ok(())
        }
    };
    tracing::info!("stopping the backend");
    backend.shutdown().await;
    if let Err(e) = invocations.flush().await {
        tracing::warn!(error = %e, "cannot flush the invocation log");
    }
    let _ = std::fs::remove_file(&addr_file);
    tracing::info!("stopped");
    result
}

/// Limits of the HTTP server against slow and numerous clients.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// A connection that has not sent a whole request head within this is
    /// closed (a new one, one idle between keep-alive requests, a slow one).
    pub header_read_timeout: Duration,
    /// Most connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
}

impl ConnLimits {
    /// The limits `serve`'s flags set.
    pub fn from_args(args: &crate::config::HttpArgs) -> ConnLimits {
        ConnLimits {
            header_read_timeout: Duration::from_secs(args.header_read_timeout_sec),
            max_connections: args.max_connections as usize,
        }
    }
}

/// File descriptors kept for everything but client connections (the
/// databases, logs, pipes and sockets to function processes).
const FD_RESERVE: u64 = 1024;

/// Raises the soft limit of open files to the hard limit, and warns when
/// that still leaves less than `max_connections` plus a reserve.
fn raise_fd_limit(max_connections: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    let need = max_connections as u64 + FD_RESERVE;
    if lim.rlim_cur < need {
        tracing::warn!(
            open_files_limit = lim.rlim_cur,
            max_connections,
            "the open files limit is below --max-connections + {FD_RESERVE}: \
             new connections may fail with EMFILE before the limit is reached"
        );
    }
}

/// Serves `app` on `listener` until `stop` resolves, then lets the open
/// connections finish their requests (idle ones close at once). HTTP/1 only,
/// each request head within `limits.header_read_timeout`, at most
/// `limits.max_connections` connections at once (one permit each, taken
/// before `accept`, so the rest wait in the kernel's backlog).
pub async fn run_http(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: ConnLimits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use tokio::sync::Semaphore;
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(false);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    tokio::pin!(stop);
    let mut at_limit_logged = false;
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => {
                at_limit_logged = false;
                p
            }
            Err(_) => {
                if !at_limit_logged {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "connection limit reached: new connections wait until one closes"
                    );
                    at_limit_logged = true;
                }
                tokio::select! {
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = &mut stop => break,
                }
            }
        };
        let (tcp, remote) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    drop(permit);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        // No Nagle delay: proxied responses are streamed in several writes.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let app = app.clone();
        let service =
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(remote));
                tower_service::Service::call(&mut app.clone(), req)
            });
        let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    res = conn.as_mut() => {
                        if let Err(e) = res {
                            tracing::debug!(%remote, error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    changed = closing.changed() => {
                        conn.as_mut().graceful_shutdown();
                        if changed.is_err() {
                            // The server is gone; the connection still finishes.
                            let _ = conn.as_mut().await;
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    // Every connection holds a permit until it ends.
    let _ = permits
        .acquire_many(u32::try_from(limits.max_connections).unwrap_or(u32::MAX))
        .await;
}

async fn start_backend(
    data_dir: &Path,
    kube: Option<crate::kube::KubeOptions>,
    sandbox: &crate::config::SandboxArgs,
) -> Result<Arc<dyn Backend>, ServeError> {
    if let Some(opts) = kube {
        return Ok(Arc::new(crate::kube::KubeBackend::connect(opts).await?));
    }
    let mut opts = LocalOptions::new(data_dir);
    opts.isolation = sandbox.isolation;
    opts.sandbox = sandbox.settings();
    opts.zygote = sandbox.zygote == crate::config::Toggle::On;
    opts.warm_idle = std::time::Duration::from_secs(sandbox.warm_idle_sec);
    let backend = LocalBackend::start(opts).await?;
    Ok(Arc::new(backend))
}

/// Resolves on SIGTERM or SIGINT with the signal's name.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            _ => {
                tracing::warn!("cannot install signal handlers; only Ctrl-C stops the operator");
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// Writes `path` by writing a temporary file next to it and renaming it over,
/// so readers never see a partial file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(ADDR_FILE);
        write_atomically(&p, b"127.0.0.1:1\n").unwrap();
        write_atomically(&p, b"127.0.0.1:2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "127.0.0.1:2\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
