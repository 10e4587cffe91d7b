//! `GET /metrics`: Prometheus metrics in the text exposition format 0.0.4,
//! without authentication. The API layer contributes a request counter by
//! status class ([`HttpCounts`], fed by the request-logging middleware) and
//! the invocation log's recorded/dropped counters; the
//! backend appends its own series ([`crate::backend::Backend::metrics_text`],
//! e.g. the kube controllers' reconcile counters).

use super::AppState;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use std::sync::atomic::{AtomicU64, Ordering};

/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Status classes counted, in the order of [`HttpCounts`]' slots.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Requests answered, per status class (1xx..5xx).
#[derive(Debug, Default)]
pub struct HttpCounts {
    by_class: [AtomicU64; 5],
}

impl HttpCounts {
    /// A zeroed counter set.
    pub const fn new() -> HttpCounts {
        HttpCounts {
            by_class: [const { AtomicU64::new(0) }; 5],
        }
    }

    /// Counts one answer with HTTP status `status` (100..=599; anything
    /// else is not a valid status and is ignored).
    pub fn record(&self, status: u16) {
        if let Some(slot) = (status / 100)
            .checked_sub(1)
            .and_then(|i| self.by_class.get(usize::from(i)))
        {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# HELP sless_http_requests_total HTTP requests answered by the operator, by status class.\n\
             # TYPE sless_http_requests_total counter\n",
        );
        for (class, n) in CLASSES.iter().zip(&self.by_class) {
            out.push_str(&format!(
                "sless_http_requests_total{{code=\"{class}\"}} {}\n",
                n.load(Ordering::Relaxed)
            ));
        }
        out
    }
}

/// The process-wide request counters (a process serves one API).
pub static HTTP: HttpCounts = HttpCounts::new();

/// Serves the metrics (no auth): the API's request counters followed by the
/// backend's series.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    responses((status = 200, description = "Prometheus metrics (text exposition format 0.0.4): HTTP requests by status class, invocation log records (recorded, dropped), and the backend's own series (the Kubernetes controllers' reconciles, failures and reconcile time)", body = String, content_type = "text/plain; version=0.0.4"))
)]
pub async fn serve(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = HTTP.render();
    if let Some(log) = crate::invocations::installed() {
        text.push_str(&log.metrics_text());
    }
    text.push_str(&state.backend.metrics_text());
    ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_status_class() {
        let c = HttpCounts::new();
        for s in [200, 201, 204, 404, 503, 101, 302, 0, 42, 600, 999] {
            c.record(s);
        }
        let text = c.render();
        assert!(text.contains("# TYPE sless_http_requests_total counter\n"));
        assert!(text.contains("sless_http_requests_total{code=\"1xx\"} 1\n"));
        assert!(text.contains("sless_http_requests_total{code=\"2xx\"} 3\n"));
        assert!(text.contains("sless_http_requests_total{code=\"3xx\"} 1\n"));
        assert!(text.contains("sless_http_requests_total{code=\"4xx\"} 1\n"));
        assert!(text.contains("sless_http_requests_total{code=\"5xx\"} 1\n"));
        assert_eq!(text.lines().count(), 7, "{text}");
    }
}
