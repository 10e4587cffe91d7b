//! The proxy's HTTP client to functions' servers: hyper's pooled HTTP/1
//! client (keep-alive connections, one pool per [`Upstream`]) over TCP, with
//! `TCP_NODELAY`, or over a function process's unix socket (its sandbox's,
//! or its own under `<data-dir>/run/sockets` when unsandboxed).
//!
//! It replaced `reqwest` on the hot path (docs/decisions.md, "the invoke
//! proxy on hyper's client"): the proxy needs no URL parsing, redirects,
//! proxies from the environment, TLS or per-request timeout boxing, and those
//! layers were a seventh of the operator's instructions per request.

use super::proxy_body::LimitedBody;
use axum::http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long an idle keep-alive connection to a function stays pooled.
const POOL_IDLE: Duration = Duration::from_secs(30);
/// Most idle connections kept per function server.
const POOL_MAX_IDLE: usize = 64;

/// A pooled client to function servers: over TCP to the request's host and
/// port ([`Upstream::tcp`]), or to one unix socket whatever the URL says
/// ([`Upstream::unix`]). Cloning shares the pool.
#[derive(Clone)]
pub struct Upstream {
    client: Client<Dialer, LimitedBody>,
    dialer: Dialer,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("dialer", &self.dialer)
            .finish()
    }
}

/// The answer of [`Upstream::request`].
pub type UpstreamResult = Result<Response<Incoming>, hyper_util::client::legacy::Error>;

impl Upstream {
    /// Connects over TCP to each request's host and port.
    pub fn tcp() -> Upstream {
        Upstream::with(Dialer::Tcp)
    }

    /// Connects every request to the unix socket at `path` (the URL's host
    /// only names the pool).
    pub fn unix(path: &Path) -> Upstream {
        Upstream::with(Dialer::Unix(Arc::new(path.to_path_buf())))
    }

    fn with(dialer: Dialer) -> Upstream {
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_MAX_IDLE)
            .pool_timer(TokioTimer::new())
            .build(dialer.clone());
        Upstream { client, dialer }
    }

    /// Sends `req` on a pooled connection (or a new one).
    pub fn request(
        &self,
        req: Request<LimitedBody>,
    ) -> impl Future<Output = UpstreamResult> + Send + 'static {
        self.client.request(req)
    }
}

/// Opens connections for the pool.
#[derive(Clone, Debug)]
enum Dialer {
    Tcp,
    Unix(Arc<PathBuf>),
}

impl tower_service::Service<Uri> for Dialer {
    type Response = Conn;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Conn>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        match self {
            Dialer::Tcp => {
                let host = uri
                    .host()
                    .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string());
                let port = uri.port_u16().unwrap_or(80);
                Box::pin(async move {
                    let host = host.ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidInput, "the URL has no host")
                    })?;
                    let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                    // Requests and answers are small writes: never hold them.
                    stream.set_nodelay(true)?;
                    Ok(Conn::Tcp(TokioIo::new(stream)))
                })
            }
            Dialer::Unix(path) => {
                let path = path.clone();
                Box::pin(async move {
                    let stream = tokio::net::UnixStream::connect(path.as_path()).await?;
                    Ok(Conn::Unix(TokioIo::new(stream)))
                })
            }
        }
    }
}

/// One connection to a function server.
enum Conn {
    Tcp(TokioIo<tokio::net::TcpStream>),
    Unix(TokioIo<tokio::net::UnixStream>),
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_flush(cx),
            Conn::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(s) => s.is_write_vectored(),
            Conn::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }
}
