//! The bodies of a proxied call, as thin `http_body` wrappers (no stream
//! adapters, no boxing beyond axum's one):
//! - [`LimitedBody`]: the caller's body on its way to the function, counted
//!   and cut off past the body limit;
//! - [`AnswerBody`]: the function's answer on its way back, ended by the
//!   function's timeout, holding the request's lease until it is done;
//! - [`RecordedBody`]: writes the call's invocation record once the answer
//!   has been streamed, has failed, or was dropped (the caller went away).

use crate::backend::Lease;
use crate::invocations::InvocationLog;
use axum::body::{Body, HttpBody};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use sless_wire::Invocation;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Instant;

/// Errors of the wrapped bodies (hyper and axum take any boxed error).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The caller's body, counted in `sent`; past `limit` bytes it fails and sets
/// `over` (the function then gets a cut-off request, the caller a 413).
pub struct LimitedBody {
    inner: Body,
    limit: Option<usize>,
    seen: usize,
    over: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
}

impl LimitedBody {
    /// Wraps `inner`.
    pub fn new(
        inner: Body,
        limit: Option<usize>,
        over: Arc<AtomicBool>,
        sent: Arc<AtomicU64>,
    ) -> LimitedBody {
        LimitedBody {
            inner,
            limit,
            seen: 0,
            over,
            sent,
        }
    }
}

impl HttpBody for LimitedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref() {
            this.seen = this.seen.saturating_add(data.len());
            this.sent.store(this.seen as u64, Ordering::Relaxed);
            if this.limit.is_some_and(|l| this.seen > l) {
                this.over.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err("the request body is over the limit".into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The function's answer: ends with an error at the function's deadline (the
/// caller sees a cut-off answer), and holds the lease of the request (a
/// function that scales to zero is not stopped under it) until dropped.
pub struct AnswerBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    _lease: Option<Lease>,
}

impl AnswerBody {
    /// Wraps `inner`, to be cut off at `deadline`.
    pub fn new(
        inner: Incoming,
        deadline: tokio::time::Instant,
        lease: Option<Lease>,
    ) -> AnswerBody {
        AnswerBody {
            inner,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            _lease: lease,
        }
    }
}

impl HttpBody for AnswerBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err("the function's timeout ended its answer".into())));
        }
        Poll::Pending
    }

    // The size is not passed on: the caller learns it from the function's
    // own Content-Length header, forwarded as is.
}

/// A call whose record is written once its answer is complete.
pub struct Pending {
    /// The log the record goes to.
    pub log: InvocationLog,
    /// The record, sizes and duration still to fill in.
    pub invocation: Invocation,
    /// When the call came in.
    pub started: Instant,
    /// The request's declared Content-Length, if any.
    pub declared: Option<u64>,
    /// The request body bytes forwarded (without a declared length).
    pub sent: Arc<AtomicU64>,
}

impl Pending {
    /// Fills in duration and sizes and records the call.
    pub fn finish(mut self, response_bytes: u64) {
        let inv = &mut self.invocation;
        inv.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        inv.request_bytes = Some(
            self.declared
                .unwrap_or_else(|| self.sent.load(Ordering::Relaxed)),
        );
        inv.response_bytes = Some(response_bytes);
        self.log.record(self.invocation);
    }
}

/// An answer that counts its bytes and records the call when it ends, fails,
/// or is dropped (the caller went away).
pub struct RecordedBody<B> {
    inner: B,
    bytes: u64,
    pending: Option<Pending>,
}

impl<B> RecordedBody<B> {
    /// Wraps `inner`; `pending` is recorded when it is done.
    pub fn new(inner: B, pending: Pending) -> RecordedBody<B> {
        RecordedBody {
            inner,
            bytes: 0,
            pending: Some(pending),
        }
    }

    fn finish(&mut self) {
        if let Some(p) = self.pending.take() {
            p.finish(self.bytes);
        }
    }
}

impl<B> HttpBody for RecordedBody<B>
where
    B: HttpBody<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match &frame {
            Some(Ok(f)) => {
                if let Some(data) = f.data_ref() {
                    this.bytes = this.bytes.saturating_add(data.len() as u64);
                }
            }
            Some(Err(_)) | None => this.finish(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

impl<B> Drop for RecordedBody<B> {
    fn drop(&mut self) {
        self.finish();
    }
}
