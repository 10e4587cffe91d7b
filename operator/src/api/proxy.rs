//! The reverse proxy to a function's HTTP server, shared by the authenticated
//! invoke endpoint, public http triggers, cron runs and services.
//!
//! Request and response bodies are streamed; hop-by-hop headers (RFC 7230
//! §6.1) are removed in both directions, and so is the caller's
//! `Authorization` (the operator's token never reaches user code).
//! `X-Request-Id` is added when absent, `X-Forwarded-For`/`-Proto`/`-Host` set.
//! The function's timeout covers the whole exchange, from connecting until the
//! response body is streamed: no answer in time is a 504; a response cut off by
//! it ends the stream early. A process that refuses or drops the connection is
//! a 502. Request bodies without a known length are forwarded chunked; an empty
//! body is forwarded as no body (never a stray chunked terminator).
//!
//! A request with a [`Record`] is recorded in the invocation log
//! ([`crate::invocations`]) once its answer has been streamed to the caller
//! (or the caller went away): method, path, status, duration, request id and
//! body sizes; never a body, a header or the query string. The operator's
//! own log lines name the path, never the query string either.

use super::error::ApiFailure;
use super::proxy_body::{AnswerBody, LimitedBody, Pending, RecordedBody};
use super::upstream::Upstream;
use crate::backend::InvokeTarget;
use crate::invocations::InvocationLog;
use axum::body::Body;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sless_wire::{ErrorCode, Invocation, InvocationSource};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The request id header added when a caller sends none.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Headers that describe one connection, never forwarded (RFC 7230 §6.1,
/// plus the obsolete `Proxy-Connection`). Names, not strings: a lookup by a
/// string parses it first (that was 7% of a proxied request's instructions).
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// One request to forward.
#[derive(Debug)]
pub struct ProxyRequest {
    /// The method, forwarded as is.
    pub method: Method,
    /// The path after the function's invoke URL, starting with `/`.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: Option<String>,
    /// The caller's headers.
    pub headers: HeaderMap,
    /// The caller's body (streamed).
    pub body: Body,
    /// The caller's address, for `X-Forwarded-For`.
    pub client_addr: Option<SocketAddr>,
    /// Largest body forwarded (413 past it); `None` streams any size.
    pub body_limit: Option<usize>,
    /// How to record the call in the invocation log; `None`: not recorded.
    pub record: Option<Record>,
}

/// Who a proxied call is recorded as, and in which log.
#[derive(Debug, Clone)]
pub struct Record {
    /// The log the record goes to.
    pub log: InvocationLog,
    /// Namespace of the function.
    pub namespace: String,
    /// The function called.
    pub function: String,
    /// What made the call.
    pub source: InvocationSource,
    /// The trigger's name, for trigger calls.
    pub trigger: Option<String>,
}

impl Record {
    /// A record in the process's invocation log (see
    /// [`crate::invocations::installed`]); `None` when there is no log.
    pub fn installed(
        namespace: &str,
        function: &str,
        source: InvocationSource,
        trigger: Option<&str>,
    ) -> Option<Record> {
        crate::invocations::installed().map(|log| Record {
            log: log.clone(),
            namespace: namespace.to_string(),
            function: function.to_string(),
            source,
            trigger: trigger.map(str::to_string),
        })
    }
}

/// Removes hop-by-hop headers, and the headers the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most requests and answers have none: one pass over the names.
    if !headers.keys().any(|name| HOP_BY_HOP.contains(name)) {
        return;
    }
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// The headers sent to the function: the caller's minus hop-by-hop headers,
/// `Authorization`, `Host` and `Expect`, plus forwarding headers and an
/// `X-Request-Id` when there is none yet ([`forward`] sets it first, with
/// [`request_id`], so the answer and the log carry the same one).
pub fn upstream_headers(mut headers: HeaderMap, client_addr: Option<SocketAddr>) -> HeaderMap {
    strip_hop_by_hop(&mut headers);
    headers.remove(header::AUTHORIZATION);
    headers.remove(header::EXPECT);
    let host = headers.remove(header::HOST);
    if caller_request_id(&headers).is_none() {
        request_id(&mut headers);
    }
    if let Some(addr) = client_addr {
        let ip = ip_text(addr.ip());
        let value = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
            Some(prior) if !prior.trim().is_empty() => format!("{prior}, {ip}"),
            _ => ip,
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(X_FORWARDED_FOR, v);
        }
    }
    if !headers.contains_key(&X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    }
    if let Some(host) = host
        && !headers.contains_key(&X_FORWARDED_HOST)
    {
        headers.insert(X_FORWARDED_HOST, host);
    }
    headers
}

/// An IP address as text, as `Display` writes it; IPv4 without the
/// formatting machinery (it was 1.5% of a proxied request's instructions).
fn ip_text(ip: std::net::IpAddr) -> String {
    let std::net::IpAddr::V4(v4) = ip else {
        return ip.to_string();
    };
    let mut s = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        if octet >= 100 {
            s.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            s.push(char::from(b'0' + octet / 10 % 10));
        }
        s.push(char::from(b'0' + octet % 10));
    }
    s
}

/// The caller's `X-Request-Id` when it is non-empty text; otherwise a new
/// one, set in `headers` (replacing an empty or non-text one).
pub fn request_id(headers: &mut HeaderMap) -> String {
    match caller_request_id(headers) {
        Some(id) => id.to_string(),
        None => {
            let id = new_request_id();
            if let Ok(v) = HeaderValue::from_str(&id) {
                headers.insert(REQUEST_ID, v);
            }
            id
        }
    }
}

/// The `X-Request-Id` in `headers` when it is non-empty text.
fn caller_request_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
}

/// A new request id: 32 hex digits, distinct for every call of this
/// process (a counter through a bijective mix) and, by a random key drawn
/// once, from other processes' ids. Not a secret: a system call per request
/// for random bytes bought nothing.
fn new_request_id() -> String {
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (process, salt) = *KEY.get_or_init(|| {
        let mut b = [0u8; 16];
        if getrandom::fill(&mut b).is_err() {
            // Time-based then: ids only need to be distinct.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            b = nanos.to_le_bytes();
        }
        let (hi, lo) = b.split_at(8);
        let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or_default());
        (word(hi), word(lo))
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let id = (u128::from(process) << 64) | u128::from(splitmix64(n ^ salt));
    format!("{id:032x}")
}

/// SplitMix64's finalizer: a bijection of u64 that scatters consecutive
/// inputs (distinct counters give distinct ids).
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Forwards one request to `target` and streams the answer back. Failures
/// become JSON errors: 504 `upstream_timeout`, 502 `upstream_failed`, 413
/// past the body limit; every answer carries the request id. With a
/// [`Record`], the call is recorded in the invocation log when the answer
/// has been streamed (or dropped).
pub async fn forward(client: &Upstream, target: &InvokeTarget, mut req: ProxyRequest) -> Response {
    let started = Instant::now();
    let record = req.record.take();
    let time = record
        .as_ref()
        .map(|_| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    let request_id = request_id(&mut req.headers);
    let method = record.as_ref().map(|_| req.method.to_string());
    let path = record.as_ref().map(|_| req.path.clone());
    let declared = super::extract::content_length(&req.headers);
    let sent = Arc::new(AtomicU64::new(0));
    let answer = exchange(client, target, req, &request_id, sent.clone()).await;
    let (mut parts, answer) = match answer {
        Ok(resp) => {
            let (parts, body) = resp.into_parts();
            (parts, Ok(body))
        }
        // The operator's own answer (an error): complete already.
        Err(resp) => {
            let (parts, body) = resp.into_parts();
            (parts, Err(body))
        }
    };
    if !parts.headers.contains_key(&REQUEST_ID)
        && let Ok(v) = HeaderValue::from_str(&request_id)
    {
        parts.headers.insert(REQUEST_ID, v);
    }
    let Some(record) = record else {
        return match answer {
            Ok(body) => Response::from_parts(parts, Body::new(body)),
            Err(body) => Response::from_parts(parts, body),
        };
    };
    let pending = Pending {
        log: record.log,
        invocation: Invocation {
            time: time.unwrap_or_default(),
            namespace: record.namespace,
            function: record.function,
            source: record.source,
            trigger: record.trigger,
            method: method.unwrap_or_default(),
            path: path.unwrap_or_default(),
            status: parts.status.as_u16(),
            duration_ms: 0,
            request_id,
            request_bytes: None,
            response_bytes: None,
        },
        started,
        declared,
        sent,
    };
    match answer {
        Ok(body) => Response::from_parts(parts, Body::new(RecordedBody::new(body, pending))),
        Err(body) => {
            pending.finish(axum::body::HttpBody::size_hint(&body).exact().unwrap_or(0));
            Response::from_parts(parts, body)
        }
    }
}

/// The exchange with the function: `req.headers` already carry `request_id`;
/// `sent` counts the body bytes forwarded. The function's answer, or the
/// operator's own (an error) as `Err`.
async fn exchange(
    client: &Upstream,
    target: &InvokeTarget,
    req: ProxyRequest,
    request_id: &str,
    sent: Arc<AtomicU64>,
) -> Result<axum::http::Response<AnswerBody>, Response> {
    let deadline = tokio::time::Instant::now() + target.timeout;
    const WHAT: &str = "the request body";
    if let Some(limit) = req.body_limit
        && super::extract::content_length(&req.headers).is_some_and(|n| n > limit as u64)
    {
        // Declared too large: read (a bounded amount of) it so the client
        // sees the 413 rather than a reset, and forward nothing.
        let _ = super::extract::read_limited(req.body, limit, WHAT, |_| {}).await;
        return Err(ApiFailure::too_large(WHAT, limit).into_response());
    }
    let uri = match upstream_uri(&target.base_url, &req.path, req.query.as_deref()) {
        Ok(uri) => uri,
        Err(e) => {
            return Err(ApiFailure::new(
                StatusCode::BAD_GATEWAY,
                ErrorCode::UpstreamFailed,
                format!("cannot form the function's URL: {e}"),
            )
            .into_response());
        }
    };
    let headers = upstream_headers(req.headers, req.client_addr);
    let over_limit = Arc::new(AtomicBool::new(false));
    let body = LimitedBody::new(req.body, req.body_limit, over_limit.clone(), sent);
    let mut upstream_req = axum::http::Request::new(body);
    *upstream_req.method_mut() = req.method.clone();
    *upstream_req.uri_mut() = uri;
    *upstream_req.headers_mut() = headers;
    let client = target.client.as_ref().unwrap_or(client);
    let sent = tokio::time::timeout_at(deadline, client.request(upstream_req)).await;
    let failure = match sent {
        Ok(Ok(resp)) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            tracing::debug!(
                method = %req.method,
                upstream = %target.base_url,
                path = %req.path,
                request_id = %request_id,
                status = parts.status.as_u16(),
                "invoked"
            );
            let body = AnswerBody::new(body, deadline, target.lease.clone());
            return Ok(axum::http::Response::from_parts(parts, body));
        }
        // A streamed (chunked) body went past the limit: the upstream
        // request was cut off there.
        _ if over_limit.load(Ordering::Relaxed) => {
            let limit = req.body_limit.unwrap_or_default();
            return Err(ApiFailure::too_large(WHAT, limit).into_response());
        }
        Ok(Err(e)) => (upstream_failure(&e), error_chain(&e)),
        Err(_) => (timed_out(target), "timed out".to_string()),
    };
    // Logged without the URL: its query string may hold secrets.
    let (failure, error) = failure;
    tracing::warn!(
        method = %req.method,
        upstream = %target.base_url,
        path = %req.path,
        request_id = %request_id,
        status = failure.status.as_u16(),
        error = %error,
        "invoke failed"
    );
    Err(failure.into_response())
}

/// `base_url` + `path` + `?query` as a request URI.
fn upstream_uri(
    base_url: &str,
    path: &str,
    query: Option<&str>,
) -> Result<axum::http::Uri, axum::http::uri::InvalidUri> {
    let base = base_url.trim_end_matches('/');
    let query = query.filter(|q| !q.is_empty());
    let mut uri = String::with_capacity(base.len() + path.len() + query.map_or(0, |q| q.len() + 1));
    uri.push_str(base);
    uri.push_str(path);
    if let Some(q) = query {
        uri.push('?');
        uri.push_str(q);
    }
    axum::http::Uri::try_from(uri)
}

/// The answer when the function did not answer within its timeout.
fn timed_out(target: &InvokeTarget) -> ApiFailure {
    ApiFailure::new(
        StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::UpstreamTimeout,
        format!(
            "the function did not answer within its timeout of {} s",
            target.timeout.as_secs_f64()
        ),
    )
}

/// The answer for a failed upstream request.
fn upstream_failure(e: &hyper_util::client::legacy::Error) -> ApiFailure {
    if e.is_connect() {
        ApiFailure::new(
            StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamFailed,
            "the function's process is not accepting connections (it may have crashed; it is restarted automatically, see the run log)",
        )
    } else {
        ApiFailure::new(
            StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamFailed,
            format!(
                "the function's process failed to answer: {} (see the run log)",
                root_cause(e)
            ),
        )
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_and_connection_listed_headers_go() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-secret-hop"),
            ("keep-alive", "timeout=5"),
            ("x-secret-hop", "1"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("proxy-authenticate", "Basic"),
            ("content-type", "application/json"),
            ("x-custom", "kept"),
        ]);
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, vec!["content-type", "x-custom"]);
    }

    #[test]
    fn authorization_never_reaches_the_function() {
        let addr: SocketAddr = "10.1.2.3:5555".parse().unwrap();
        let h = upstream_headers(
            headers(&[
                ("authorization", "Bearer secret"),
                ("host", "op.example"),
                ("x-forwarded-for", "192.0.2.1"),
                ("content-length", "12"),
            ]),
            Some(addr),
        );
        assert!(h.get("authorization").is_none());
        assert!(h.get("host").is_none());
        assert_eq!(h["x-forwarded-for"], "192.0.2.1, 10.1.2.3");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "op.example");
        assert_eq!(h["content-length"], "12");
        assert_eq!(h[REQUEST_ID].len(), 32);
    }

    #[test]
    fn ip_text_is_what_display_writes() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.1.2.3",
            "192.168.100.255",
            "9.99.100.250",
            "::1",
            "2001:db8::8a2e:370:7334",
            "::ffff:10.0.0.1",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            assert_eq!(ip_text(ip), ip.to_string());
        }
    }

    #[test]
    fn new_request_ids_are_distinct_hex() {
        let ids: std::collections::HashSet<String> =
            (0..20_000).map(|_| new_request_id()).collect();
        assert_eq!(ids.len(), 20_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
        // Consecutive ids do not share their low half's digits.
        let (a, b) = (new_request_id(), new_request_id());
        assert_ne!(a[16..24], b[16..24]);
    }

    #[test]
    fn a_callers_request_id_is_kept() {
        let h = upstream_headers(headers(&[("x-request-id", "abc-1")]), None);
        assert_eq!(h[REQUEST_ID], "abc-1");
        assert!(h.get("x-forwarded-for").is_none());
    }

    #[tokio::test]
    async fn calls_are_recorded_when_their_answer_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let log = InvocationLog::open(dir.path(), 100).unwrap();
        let app = axum::Router::new().route(
            "/x",
            axum::routing::post(|| async { (StatusCode::CREATED, "hello") }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = Upstream::tcp();
        let record = |trigger: Option<&str>| {
            Some(Record {
                log: log.clone(),
                namespace: "sless-00000000".into(),
                function: "fn".into(),
                source: InvocationSource::HttpTrigger,
                trigger: trigger.map(str::to_string),
            })
        };
        let target = InvokeTarget {
            lease: None,
            client: None,
            base_url: format!("http://{addr}"),
            timeout: std::time::Duration::from_secs(5),
        };
        let r = forward(
            &client,
            &target,
            ProxyRequest {
                method: Method::POST,
                path: "/x".into(),
                query: Some("secret=1".into()),
                headers: headers(&[("x-request-id", "rid-1"), ("authorization", "Bearer t")]),
                body: Body::from("12345"),
                client_addr: None,
                body_limit: None,
                record: record(Some("web")),
            },
        )
        .await;
        assert_eq!(r.status(), StatusCode::CREATED);
        let body = axum::body::to_bytes(r.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"hello");

        // An answer nobody reads is recorded when dropped.
        let r = forward(
            &client,
            &target,
            ProxyRequest {
                method: Method::POST,
                path: "/x".into(),
                query: None,
                headers: HeaderMap::new(),
                body: Body::empty(),
                client_addr: None,
                body_limit: None,
                record: record(None),
            },
        )
        .await;
        let generated = r.headers()[REQUEST_ID].to_str().unwrap().to_string();
        drop(r);

        // The operator's own error answers are recorded at once, with the id.
        server.abort();
        let refused = InvokeTarget {
            lease: None,
            client: None,
            base_url: format!("http://127.0.0.1:{}", {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            }),
            timeout: std::time::Duration::from_secs(5),
        };
        let r = forward(
            &client,
            &refused,
            ProxyRequest {
                method: Method::GET,
                path: "/gone".into(),
                query: None,
                headers: HeaderMap::new(),
                body: Body::empty(),
                client_addr: None,
                body_limit: None,
                record: record(None),
            },
        )
        .await;
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
        assert!(r.headers().contains_key(REQUEST_ID));

        let got = log.query("sless-00000000", None, 10).await.unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[0].status, got[0].path.as_str()), (502, "/gone"));
        assert_eq!(got[0].method, "GET");
        assert_eq!(got[1].request_id, generated);
        assert_eq!(got[1].response_bytes, Some(0));
        let first = &got[2];
        assert_eq!(first.status, 201);
        assert_eq!(first.path, "/x", "no query string in the record");
        assert_eq!(first.request_id, "rid-1");
        assert_eq!(first.request_bytes, Some(5));
        assert_eq!(first.response_bytes, Some(5));
        assert_eq!(first.source, InvocationSource::HttpTrigger);
        assert_eq!(first.trigger.as_deref(), Some("web"));
        assert!(first.time.ends_with('Z') && first.time.contains('T'));
    }

    #[tokio::test]
    async fn refused_connection_is_502_and_slow_function_504() {
        let client = Upstream::tcp();
        // A port with nothing listening: bind, note the port, close.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let target = InvokeTarget {
            lease: None,
            client: None,
            base_url: format!("http://127.0.0.1:{port}"),
            timeout: std::time::Duration::from_secs(2),
        };
        let req = || ProxyRequest {
            method: Method::GET,
            path: "/".into(),
            query: None,
            headers: HeaderMap::new(),
            body: Body::empty(),
            body_limit: None,
            client_addr: None,
            record: None,
        };
        let r = forward(&client, &target, req()).await;
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY);

        // A server that accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let target = InvokeTarget {
            lease: None,
            client: None,
            base_url: format!("http://{addr}"),
            timeout: std::time::Duration::from_millis(300),
        };
        let r = forward(&client, &target, req()).await;
        assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT);
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let body: sless_wire::ErrorBody = serde_json::from_slice(&body).unwrap();
        assert_eq!(body.error.code, ErrorCode::UpstreamTimeout);
        assert!(body.error.message.contains("0.3 s"));
        hold.abort();
    }
}
