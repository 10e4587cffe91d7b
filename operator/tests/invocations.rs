//! The invocation log and the `/funcs` HTML page, end to end: the real
//! operator binary, real Python functions, calls through the invoke URL, an
//! http trigger's public URL and a cron trigger; then
//! `GET /v1/namespaces/{ns}/invocations` (order, sources, statuses, filter,
//! limit, auth) and the page (auth by header or `?token=`, 401/403, HTML
//! escaping, security headers, no token in the operator's log).

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::{Phase, paths};
use std::time::{Duration, Instant};
use support::{Client, Operator, zip_of};

const READY: Duration = Duration::from_secs(90);

/// Answers with its path; `/fail` raises (the runtime answers 500).
const ECHO: &str = "def handler(event, context):\n    if event['path'] == '/fail':\n        raise RuntimeError('boom')\n    return {'path': event['path']}\n";

/// Fails at import with markup in its error, which becomes the function's
/// status message: a user-controlled string the page shows.
const BROKEN: &str = "raise RuntimeError(\"<script>alert('pwned')</script> & more\")\n";

async fn function(c: &Client, name: &str, code: &str, phase: Phase) {
    let (status, body) = c
        .create(json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(status, 201, "create {name}: {body}");
    let (status, body) = c.upload(name, zip_of(&[("main.py", code)])).await;
    assert!(
        (200..300).contains(&status),
        "upload {name}: {status} {body}"
    );
    c.wait_phase(name, phase, READY).await;
}

/// `GET .../invocations` with a raw query string.
async fn invocations(c: &Client, query: &str) -> (u16, Value) {
    let path = format!("{}{query}", paths::invocations(&c.namespace));
    c.call(Method::GET, &path, None).await
}

/// Polls the log until `ok` holds for its items (records are written when a
/// call's answer has been streamed, a moment after the caller has it).
async fn wait_items(
    c: &Client,
    query: &str,
    what: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = invocations(c, query).await;
        assert_eq!(status, 200, "{body}");
        let items = body["items"].as_array().cloned().unwrap_or_default();
        if ok(&items) {
            return items;
        }
        assert!(
            Instant::now() < deadline,
            "invocation log: not {what} within 30 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn page(url: &str, token: Option<&str>) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("page");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap_or_default())
}

fn assert_html(headers: &reqwest::header::HeaderMap, what: &str) {
    let h = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert!(
        h("content-type").starts_with("text/html"),
        "{what}: {headers:?}"
    );
    assert_eq!(h("cache-control"), "no-store", "{what}");
    assert_eq!(h("referrer-policy"), "no-referrer", "{what}");
    assert_eq!(
        h("content-security-policy"),
        "default-src 'none'; style-src 'unsafe-inline'",
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_logged_and_the_funcs_page_shows_them() {
    let mut op = Operator::start();
    let c = op.client("invocations-user");
    let other = op.client("invocations-other");
    c.ensure().await;
    function(&c, "echo", ECHO, Phase::Ready).await;
    let invoke = paths::function_invoke(&c.namespace, "echo");

    // Three calls through the invoke URL: ok, raising, with a path, query
    // and the caller's request id.
    let (s, body) = c.invoke("echo", &json!({"a": 1})).await;
    assert_eq!(s, 200, "{body}");
    let r = c
        .req(Method::POST, &format!("{invoke}/fail"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let fail_id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let r = c
        .req(Method::GET, &format!("{invoke}/x?secret=query-value"))
        .header("x-request-id", "caller-rid-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // One through an http trigger's public URL (no token).
    let (s, t) = c
        .call(
            Method::POST,
            &paths::triggers(&c.namespace),
            Some(json!({"name": "web", "function": "echo", "type": "http"})),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let public = c.url(&paths::trigger_public(&c.namespace, "web"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = reqwest::Client::new()
            .post(format!("{public}/hook"))
            .body("12345")
            .send()
            .await
            .unwrap();
        if r.status().as_u16() == 200 {
            // Read the answer: a caller that hangs up before the body has
            // been sent is recorded with the bytes it actually got (0).
            let body = r.bytes().await.unwrap();
            assert!(!body.is_empty());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "trigger never served: {}",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Newest first, with source, status, method, path (no query) and ids.
    let items = wait_items(&c, "", "4 records", |i| i.len() >= 4).await;
    assert_eq!(items.len(), 4, "{items:#?}");
    let web = &items[0];
    assert_eq!(web["source"], "http_trigger", "{web}");
    assert_eq!(web["trigger"], "web");
    assert_eq!(web["function"], "echo");
    assert_eq!(
        (web["method"].as_str(), web["path"].as_str()),
        (Some("POST"), Some("/hook"))
    );
    assert_eq!(web["status"], 200);
    assert_eq!(web["request_bytes"], 5);
    assert!(web["response_bytes"].as_u64().unwrap() > 0, "{web}");
    assert_eq!(web["namespace"], c.namespace.as_str());
    let get = &items[1];
    assert_eq!(get["source"], "invoke", "{get}");
    assert!(get.get("trigger").is_none(), "{get}");
    assert_eq!(
        (get["method"].as_str(), get["path"].as_str()),
        (Some("GET"), Some("/x"))
    );
    assert_eq!(get["request_id"], "caller-rid-1");
    let fail = &items[2];
    assert_eq!(fail["status"], 500, "{fail}");
    assert_eq!(fail["path"], "/fail");
    assert_eq!(fail["request_id"], fail_id.as_str());
    assert_eq!(
        (items[3]["status"].as_u64(), items[3]["path"].as_str()),
        (Some(200), Some("/"))
    );
    for i in &items {
        assert!(i["time"].as_str().unwrap().ends_with('Z'), "{i}");
        assert!(i["duration_ms"].is_u64(), "{i}");
    }
    let text = serde_json::to_string(&items).unwrap();
    assert!(
        !text.contains("query-value") && !text.contains(&c.token),
        "{text}"
    );

    // Limit and filter.
    let (s, b) = invocations(&c, "?limit=2").await;
    assert_eq!(s, 200);
    assert_eq!(b["items"].as_array().unwrap().len(), 2);
    assert_eq!(b["items"][0], items[0]);
    let (s, b) = invocations(&c, "?function=echo&limit=1000").await;
    assert_eq!(
        (s, b["items"].as_array().map(Vec::len)),
        (200, Some(4)),
        "{b}"
    );
    let (s, b) = invocations(&c, "?function=nothing-here").await;
    assert_eq!(
        (s, b["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{b}"
    );
    for (query, field) in [
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?limit=lots", "limit"),
        ("?limit=-1", "limit"),
        ("?function=Not_A_Name", "function"),
    ] {
        let (s, b) = invocations(&c, query).await;
        assert_eq!(
            (s, b["error"]["field"].as_str()),
            (400, Some(field)),
            "{query}: {b}"
        );
    }

    // Auth: another user's namespace 403, no token 401, a bad token 401.
    let (s, b) = other
        .call(Method::GET, &paths::invocations(&c.namespace), None)
        .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{b}"
    );
    let r = reqwest::Client::new()
        .get(c.url(&paths::invocations(&c.namespace)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = reqwest::Client::new()
        .get(c.url(&paths::invocations(&c.namespace)))
        .bearer_auth("not.a.token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // The other user's own log is empty.
    let (s, b) = other
        .call(Method::GET, &paths::invocations(&other.namespace), None)
        .await;
    assert_eq!(
        (s, b["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{b}"
    );

    // A cron trigger's runs are recorded too (every second, seconds allowed).
    function(&c, "ticker", ECHO, Phase::Ready).await;
    let (s, t) = c
        .call(
            Method::POST,
            &paths::triggers(&c.namespace),
            Some(json!({"name": "tick", "function": "ticker", "type": "cron",
                        "schedule": "* * * * * *", "payload": "{\"n\": 1}"})),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let runs = wait_items(&c, "?function=ticker", "a cron run", |i| !i.is_empty()).await;
    let run = &runs[0];
    assert_eq!(run["source"], "cron", "{run}");
    assert_eq!(run["trigger"], "tick");
    assert_eq!(
        (run["method"].as_str(), run["path"].as_str()),
        (Some("POST"), Some("/"))
    );
    assert_eq!(run["status"], 200);
    assert_eq!(run["request_bytes"], 8);
    let (s, _) = c
        .call(Method::DELETE, &paths::trigger(&c.namespace, "tick"), None)
        .await;
    assert!((200..300).contains(&s), "{s}");
    let (s, b) = invocations(&c, "?function=echo").await;
    assert_eq!(b["items"].as_array().map(Vec::len), Some(4), "{s} {b}");

    // The HTML page, with a function whose status message carries markup.
    function(&c, "broken", BROKEN, Phase::Failed).await;
    let own = c.url(&paths::funcs_page(&c.namespace));
    let (s, h, html) = page(&own, Some(&c.token)).await;
    assert_eq!(s, 200, "{html}");
    assert_html(&h, "page");
    for needle in [
        "echo",
        "ticker",
        "broken",
        "Ready",
        "Failed",
        "python3.11",
        "web",
        "http_trigger (web)",
        "caller-rid-1",
        &paths::function_invoke(&c.namespace, "echo"),
        &format!("/t/{}/web", c.namespace),
    ] {
        assert!(html.contains(needle), "page lacks {needle:?}:\n{html}");
    }
    assert!(
        html.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt; &amp; more"),
        "the failure message is not escaped:\n{html}"
    );
    assert!(!html.contains("<script"), "markup leaked:\n{html}");

    // ?token= for a browser, with and without the namespace in the path.
    let query_url = |base: &str, token: &str| format!("{base}?token={token}");
    let (s, h, html) = page(&query_url(&c.url(paths::FUNCS), &c.token), None).await;
    assert_eq!(s, 200, "{html}");
    assert_html(&h, "?token= page");
    assert!(html.contains(&c.namespace) && html.contains("broken"));
    let (s, _, html) = page(&query_url(&own, &c.token), None).await;
    assert_eq!(s, 200, "{html}");

    // Another user's token: 403, as HTML; the other user's own page is empty.
    let (s, h, html) = page(&query_url(&own, &other.token), None).await;
    assert_eq!(s, 403, "{html}");
    assert_html(&h, "403 page");
    assert!(!html.contains("broken"), "{html}");
    let (s, _, _) = page(&own, Some(&other.token)).await;
    assert_eq!(s, 403);
    let (s, _, html) = page(&c.url(paths::FUNCS), Some(&other.token)).await;
    assert_eq!(s, 200);
    assert!(
        html.contains(&other.namespace) && !html.contains("broken"),
        "{html}"
    );

    // No or a bad token: 401, as HTML.
    for url in [
        c.url(paths::FUNCS),
        own.clone(),
        query_url(&own, "garbage"),
        query_url(&c.url(paths::FUNCS), ""),
    ] {
        let (s, h, html) = page(&url, None).await;
        assert_eq!(s, 401, "{url}: {html}");
        assert_html(&h, "401 page");
        assert!(!html.contains("broken"), "{html}");
    }
    let (s, _, _) = page(&own, Some("garbage")).await;
    assert_eq!(s, 401);

    // The operator's log has the page requests, never the token (the
    // request log writes paths without their query).
    let log = op.log();
    assert!(
        log.contains("/funcs"),
        "no request lines in the log:\n{log}"
    );
    assert!(
        !log.contains(&c.token),
        "the token is in the operator's log"
    );
    assert!(
        !log.contains(&other.token),
        "a token is in the operator's log"
    );
    assert!(!log.contains("query-value"), "a query string is in the log");

    // /metrics counts the records.
    let metrics = reqwest::get(c.url(paths::METRICS))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let recorded: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sless_invocations_recorded_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no recorded counter:\n{metrics}"));
    assert!(recorded >= 5, "{metrics}");
    assert!(
        metrics.contains("sless_invocations_dropped_total 0\n"),
        "{metrics}"
    );

    // The log outlives a restart.
    op.stop();
    op.spawn();
    let c = op.client("invocations-user");
    let (s, b) = invocations(&c, "?function=echo").await;
    assert_eq!(
        (s, b["items"].as_array().map(Vec::len)),
        (200, Some(4)),
        "{b}"
    );
    assert!(op.data_dir.join("invocations.db").is_file());
}

/// Says which request it answers (the caller's X-Request-Id) and echoes the body.
const KEEPALIVE: &str =
    "def handler(event, context):\n    return {'id': context.requestId, 'n': event['body']['n']}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_keep_alive_requests_are_all_answered_and_logged() {
    use futures_util::StreamExt;
    const N: usize = 2000;
    let op = Operator::start();
    let c = op.client("keepalive-user");
    c.ensure().await;
    function(&c, "ka", KEEPALIVE, Phase::Ready).await;
    // One pooled client, at most 8 requests in flight: keep-alive connections.
    let path = paths::function_invoke(&c.namespace, "ka");
    let answers: Vec<(usize, u16, String)> = futures_util::stream::iter(0..N)
        .map(|n| {
            let r = c
                .req(Method::POST, &path)
                .header("x-request-id", format!("ka-{n}"))
                .json(&json!({"n": n}));
            async move {
                let resp = r.send().await.expect("a keep-alive request failed");
                let status = resp.status().as_u16();
                (n, status, resp.text().await.unwrap_or_default())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    assert_eq!(answers.len(), N);
    for (n, status, body) in &answers {
        assert_eq!(*status, 200, "request {n}: {body}");
        let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
        assert_eq!(v, json!({"id": format!("ka-{n}"), "n": n}), "request {n}");
    }
    // Every call is in the log, or counted as dropped.
    let metrics = || async {
        let text = c
            .http
            .get(c.url(paths::METRICS))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .unwrap_or_default();
        let read = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
        };
        (
            read("sless_invocations_recorded_total"),
            read("sless_invocations_dropped_total"),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (recorded, dropped) = metrics().await;
        if recorded + dropped >= N as u64 {
            assert_eq!(recorded + dropped, N as u64, "one record per call");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{recorded} recorded, {dropped} dropped of {N}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, dropped) = metrics().await;
    // The newest 1,000 records: this function's calls, 200, distinct ids.
    let want = (1000usize).min(N - dropped as usize);
    let items = wait_items(
        &c,
        "?function=ka&limit=1000",
        "the keep-alive calls",
        |items| items.len() >= want,
    )
    .await;
    let ids: std::collections::BTreeSet<&str> = items
        .iter()
        .map(|i| {
            assert_eq!(i["status"], 200, "{i}");
            assert_eq!(i["function"], "ka", "{i}");
            i["request_id"].as_str().unwrap_or_default()
        })
        .collect();
    assert_eq!(ids.len(), items.len(), "a call recorded twice");
    assert!(ids.iter().all(|id| id.starts_with("ka-")), "{ids:?}");
}
