//! `GET /funcs/{ns}` and `GET /funcs?token=<jwt>`: a server-rendered HTML
//! page of one namespace: its functions, triggers and latest invocations.
//!
//! The token comes from `Authorization: Bearer` or, for a browser, from the
//! `token` query parameter, and is verified like the API's (401 when missing
//! or invalid; 403 when `{ns}` is not the token's namespace; without `{ns}`
//! the page shows the token's own namespace). Errors are HTML pages with the
//! right status. Every shown string is HTML-escaped; env vars and payloads
//! are never shown. No script, no external asset: the answer's
//! Content-Security-Policy allows inline styles only, it is never cached and
//! sends no Referer (the URL may hold the token). The request log never
//! holds query strings (see `router::log_requests`).

use super::AppState;
use crate::auth::{AuthError, Principal};
use axum::extract::{RawPathParams, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use sless_wire::{Function, Invocation, Trigger, TriggerType};
use std::fmt::Write as _;

/// Invocations shown on the page.
pub const RECENT_INVOCATIONS: usize = 20;

/// The answer's `Content-Security-Policy`: nothing but inline styles.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\
table{border-collapse:collapse;width:100%}\
th,td{border:1px solid #ccc;padding:.3em .5em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}code{font-size:.95em}\
.msg{white-space:pre-wrap;max-width:40em;font-family:monospace;font-size:.9em}\
.ok{color:#176f2c;font-weight:600}.bad{color:#b00020;font-weight:600}\
.wait{color:#8a5a00;font-weight:600}.muted{color:#777}";

/// Escapes text for HTML element content and quoted attribute values:
/// `&`, `<`, `>`, `"` and `'`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `GET /funcs`: the page of the token's own namespace.
#[utoipa::path(
    get,
    path = "/funcs",
    operation_id = "funcs_page_own",
    tag = "pages",
    params(("token" = Option<String>, Query, description = "The JWT, for a browser (or send `Authorization: Bearer`)")),
    responses(
        (status = 200, description = "HTML page of the token's namespace: functions, triggers, latest invocations", body = String, content_type = "text/html"),
        (status = 401, description = "Missing or invalid token (an HTML page)", body = String, content_type = "text/html"),
    ),
    security((), ("bearer" = []))
)]
pub async fn own(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    page(&state, None, &headers, uri.query()).await
}

/// `GET /funcs/{ns}`: the page of namespace `{ns}`, which must be the token's.
#[utoipa::path(
    get,
    path = "/funcs/{ns}",
    operation_id = "funcs_page",
    tag = "pages",
    params(
        ("ns" = String, Path, description = "The token's namespace"),
        ("token" = Option<String>, Query, description = "The JWT, for a browser (or send `Authorization: Bearer`)"),
    ),
    responses(
        (status = 200, description = "HTML page of the namespace: functions, triggers, latest invocations", body = String, content_type = "text/html"),
        (status = 401, description = "Missing or invalid token (an HTML page)", body = String, content_type = "text/html"),
        (status = 403, description = "The token is for another namespace (an HTML page)", body = String, content_type = "text/html"),
    ),
    security((), ("bearer" = []))
)]
pub async fn namespace(
    State(state): State<AppState>,
    params: RawPathParams,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let ns = params
        .iter()
        .find(|(k, _)| *k == "ns")
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    page(&state, Some(ns), &headers, uri.query()).await
}

/// Why no page is shown.
#[derive(Debug, thiserror::Error)]
enum PageError {
    #[error("{0}")]
    Unauthorized(#[from] AuthError),
    #[error("your token grants namespace {granted}, not {asked}")]
    Forbidden { granted: String, asked: String },
    #[error("the operator could not read the namespace; see its log")]
    Internal,
}

impl PageError {
    fn status(&self) -> StatusCode {
        match self {
            PageError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            PageError::Forbidden { .. } => StatusCode::FORBIDDEN,
            PageError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// The token: the `Authorization` header when there is one, else `?token=`.
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Principal, AuthError> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.to_str().map_err(|_| {
            AuthError::Malformed("the Authorization header is not ASCII".to_string())
        })?;
        return state.auth.verify_header(Some(value)).await;
    }
    let token = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    match token.as_deref().map(str::trim) {
        None | Some("") => Err(AuthError::MissingToken),
        Some(t) => state.auth.verify(t).await,
    }
}

async fn page(
    state: &AppState,
    asked: Option<String>,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Response {
    match render_page(state, asked, headers, query).await {
        Ok(html) => html_response(StatusCode::OK, html),
        Err(e) => {
            let status = e.status();
            let mut resp = html_response(status, error_html(status, &e.to_string()));
            if status == StatusCode::UNAUTHORIZED {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            resp
        }
    }
}

async fn render_page(
    state: &AppState,
    asked: Option<String>,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<String, PageError> {
    let principal = authenticate(state, headers, query).await.inspect_err(|e| {
        tracing::info!(reason = %e, "funcs page: not authenticated");
    })?;
    let ns = match asked {
        Some(asked) if asked != principal.namespace => {
            tracing::info!(sub_namespace = %principal.namespace, path_namespace = %asked, "funcs page: namespace forbidden");
            return Err(PageError::Forbidden {
                granted: principal.namespace,
                asked,
            });
        }
        Some(asked) => asked,
        None => principal.namespace,
    };
    let functions = match state.backend.list_functions(&ns).await {
        Ok(f) => f,
        Err(crate::Error::NotFound {
            kind: "namespace", ..
        }) => Vec::new(),
        Err(e) => {
            tracing::error!(error = %e, "funcs page: cannot list functions");
            return Err(PageError::Internal);
        }
    };
    let triggers = match state.backend.list_triggers(&ns).await {
        Ok(t) => Ok(t
            .into_iter()
            .map(|t| super::triggers::with_url(&state.public_url, t))
            .collect()),
        Err(crate::Error::NotFound {
            kind: "namespace", ..
        }) => Ok(Vec::new()),
        Err(crate::Error::Unsupported(_)) => Err("this backend has no triggers"),
        Err(e) => {
            tracing::error!(error = %e, "funcs page: cannot list triggers");
            Err("the triggers could not be read; see the operator's log")
        }
    };
    let invocations = match crate::invocations::installed() {
        None => Err("this operator process has no invocation log"),
        Some(log) => log.query(&ns, None, RECENT_INVOCATIONS).await.map_err(|e| {
            tracing::error!(error = %e, "funcs page: cannot read the invocation log");
            "the invocation log could not be read; see the operator's log"
        }),
    };
    Ok(render(
        &ns,
        &functions,
        triggers.as_deref().map_err(|e| *e),
        invocations.as_deref().map_err(|e| *e),
    ))
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut resp = (status, html).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(title)
    )
}

fn error_html(status: StatusCode, message: &str) -> String {
    let reason = status.canonical_reason().unwrap_or("Error");
    let mut html = head(&format!("{} {reason} · sless", status.as_u16()));
    let _ = write!(
        html,
        "<h1>{} {}</h1>\n<p>{}</p>\n",
        status.as_u16(),
        escape(reason),
        escape(message)
    );
    if status == StatusCode::UNAUTHORIZED {
        html.push_str(
            "<p class=\"muted\">Send <code>Authorization: Bearer &lt;token&gt;</code>, \
             or open <code>/funcs?token=&lt;token&gt;</code>.</p>\n",
        );
    }
    html.push_str("</body></html>\n");
    html
}

fn opt(v: Option<&str>) -> String {
    match v {
        Some(s) if !s.is_empty() => escape(s),
        _ => "<span class=\"muted\">–</span>".to_string(),
    }
}

fn phase_class(phase: &str) -> &'static str {
    match phase {
        "Ready" | "Active" => "ok",
        "Failed" => "bad",
        _ => "wait",
    }
}

fn status_class(status: u16) -> &'static str {
    match status {
        200..=399 => "ok",
        _ => "bad",
    }
}

/// The page of namespace `ns`. `triggers` and `invocations` are an
/// explanation when they cannot be shown.
fn render(
    ns: &str,
    functions: &[Function],
    triggers: Result<&[Trigger], &str>,
    invocations: Result<&[Invocation], &str>,
) -> String {
    let mut html = head(&format!("{ns} · sless functions"));
    let _ = writeln!(html, "<h1>Functions of <code>{}</code></h1>", escape(ns));

    let _ = writeln!(html, "<h2>Functions ({})</h2>", functions.len());
    if functions.is_empty() {
        html.push_str("<p class=\"muted\">No functions.</p>\n");
    } else {
        html.push_str(
            "<table><tr><th>Name</th><th>Runtime</th><th>Phase</th><th>Message</th>\
             <th>Memory</th><th>Timeout</th><th>Last built</th><th>Invoke path</th></tr>\n",
        );
        for f in functions {
            let phase = f.status.phase.as_str();
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"msg\">{}</td>\
                 <td>{} MB</td><td>{} s</td><td>{}</td><td><code>{}</code></td></tr>",
                escape(&f.name),
                escape(f.spec.runtime.as_str()),
                phase_class(phase),
                escape(phase),
                opt(f.status.message.as_deref()),
                f.spec.memory_mb,
                f.spec.timeout_sec,
                opt(f.status.last_built_at.as_deref()),
                escape(&f.status.invoke_path),
            );
        }
        html.push_str("</table>\n");
    }

    match triggers {
        Err(why) => {
            let _ = writeln!(
                html,
                "<h2>Triggers</h2>\n<p class=\"muted\">{}</p>",
                escape(why)
            );
        }
        Ok(triggers) => {
            let _ = writeln!(html, "<h2>Triggers ({})</h2>", triggers.len());
            if triggers.is_empty() {
                html.push_str("<p class=\"muted\">No triggers.</p>\n");
            } else {
                html.push_str(
                    "<table><tr><th>Name</th><th>Type</th><th>Function</th>\
                     <th>Schedule or URL</th><th>Phase</th><th>Message</th></tr>\n",
                );
                for t in triggers {
                    let phase = format!("{:?}", t.status.phase);
                    let target = match t.spec.trigger_type {
                        TriggerType::Cron => match t.spec.schedule.as_deref() {
                            Some(s) => format!("<code>{}</code>", escape(s)),
                            None => opt(None),
                        },
                        TriggerType::Http => match t.status.url.as_deref() {
                            Some(url) => {
                                format!("<a href=\"{0}\" rel=\"noreferrer\">{0}</a>", escape(url))
                            }
                            None => opt(None),
                        },
                    };
                    let _ = writeln!(
                        html,
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td>\
                         <td class=\"msg\">{}</td></tr>",
                        escape(&t.name),
                        escape(t.spec.trigger_type.as_str()),
                        escape(&t.spec.function),
                        target,
                        phase_class(&phase),
                        escape(&phase),
                        opt(t.status.message.as_deref()),
                    );
                }
                html.push_str("</table>\n");
            }
        }
    }

    match invocations {
        Err(why) => {
            let _ = writeln!(
                html,
                "<h2>Latest invocations</h2>\n<p class=\"muted\">{}</p>",
                escape(why)
            );
        }
        Ok(items) => {
            let _ = writeln!(
                html,
                "<h2>Latest invocations ({}, newest first)</h2>",
                items.len()
            );
            if items.is_empty() {
                html.push_str("<p class=\"muted\">No invocations recorded.</p>\n");
            } else {
                html.push_str(
                    "<table><tr><th>Time</th><th>Function</th><th>Source</th><th>Method</th>\
                     <th>Path</th><th>Status</th><th>Duration</th><th>Request id</th></tr>\n",
                );
                for i in items {
                    let source = match &i.trigger {
                        Some(t) => format!("{} ({})", i.source.as_str(), t),
                        None => i.source.as_str().to_string(),
                    };
                    let _ = writeln!(
                        html,
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>\
                         <td class=\"{}\">{}</td><td>{} ms</td><td><code>{}</code></td></tr>",
                        escape(&i.time),
                        escape(&i.function),
                        escape(&source),
                        escape(&i.method),
                        escape(&i.path),
                        status_class(i.status),
                        i.status,
                        i.duration_ms,
                        escape(&i.request_id),
                    );
                }
                html.push_str("</table>\n");
            }
        }
    }
    let _ = writeln!(
        html,
        "<p class=\"muted\">JSON: <code>GET {}</code>, <code>GET {}</code>, <code>GET {}</code></p>",
        escape(&sless_wire::paths::functions(ns)),
        escape(&sless_wire::paths::triggers(ns)),
        escape(&sless_wire::paths::invocations(ns)),
    );
    html.push_str("</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use sless_wire::InvocationSource;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(escape("plain text, é 😀"), "plain text, é 😀");
        assert_eq!(escape(""), "");
        // Already-escaped text is escaped again (shown literally, never decoded).
        assert_eq!(escape("&lt;"), "&amp;lt;");
    }

    fn function(message: &str) -> Function {
        serde_json::from_value(serde_json::json!({
            "namespace": "sless-00000000",
            "name": "hello",
            "spec": {"runtime": "python3.11", "entrypoint": "main.handler",
                     "env_vars": {"SECRET": "hunter2"}, "memory_mb": 128, "timeout_sec": 30},
            "status": {"phase": "Failed", "message": message,
                       "invoke_path": "/v1/namespaces/sless-00000000/functions/hello/invoke"},
            "created_at": "2026-12-02T10:00:00Z",
            "updated_at": "2026-12-02T10:00:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn the_page_escapes_user_strings_and_hides_env() {
        let inv = Invocation {
            time: "2026-12-02T10:00:00.000Z".into(),
            namespace: "sless-00000000".into(),
            function: "hello".into(),
            source: InvocationSource::HttpTrigger,
            trigger: Some("web".into()),
            method: "POST".into(),
            path: "/a".into(),
            status: 500,
            duration_ms: 7,
            request_id: "<img src=x onerror=alert(1)>".into(),
            request_bytes: None,
            response_bytes: None,
        };
        let html = render(
            "sless-00000000",
            &[function("boom: <script>alert('x')</script>")],
            Err("this backend has no triggers"),
            Ok(std::slice::from_ref(&inv)),
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("boom: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("http_trigger (web)"));
        assert!(html.contains("class=\"bad\">Failed<"));
        assert!(!html.contains("hunter2") && !html.contains("SECRET"));
        assert!(html.contains("this backend has no triggers"));
    }

    #[test]
    fn error_pages_escape_their_message() {
        let html = error_html(StatusCode::FORBIDDEN, "not <b>yours</b>");
        assert!(html.contains("<h1>403 Forbidden</h1>"));
        assert!(html.contains("not &lt;b&gt;yours&lt;/b&gt;"));
    }
}
