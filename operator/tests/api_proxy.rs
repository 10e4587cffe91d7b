//! The invoke reverse proxy end to end: a real Python function behind the real
//! operator. What the function sees (method, path, query, headers, body) and
//! what the caller gets back (status, headers, body), hop-by-hop and
//! `Authorization` headers stripped, the timeout enforced with a 504.

mod support;

use serde_json::{Value, json};
use sless_wire::{Phase, paths};
use std::time::{Duration, Instant};
use support::{Operator, zip_of};

const ECHO: &str = r#"import time

def handler(event, context):
    path = event["path"]
    if path == "/sleep":
        time.sleep(3)
        return "late"
    if path == "/status":
        return {"statusCode": 201, "headers": {"x-fn": "yes", "content-type": "text/plain"}, "body": "made"}
    body = event.get("body")
    return {
        "method": event["method"],
        "path": path,
        "query": event["query"],
        "headers": event["headers"],
        "body": body if not isinstance(body, str) else None,
        "text_len": len(body) if isinstance(body, str) else None,
    }
"#;

#[tokio::test]
async fn invoke_proxy_forwards_and_strips() {
    let op = Operator::start();
    let c = op.client("proxy-user");
    c.ensure().await;
    let (code, body) = c
        .create(json!({
            "name": "echo", "runtime": "python3.11", "entrypoint": "main.handler",
            "timeout_sec": 1
        }))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = c.upload("echo", zip_of(&[("main.py", ECHO)])).await;
    assert_eq!(code, 202, "{body}");
    c.wait_phase("echo", Phase::Ready, Duration::from_secs(60))
        .await;
    let invoke = paths::function_invoke(&c.namespace, "echo");

    // JSON POST to the bare invoke URL: path "/", headers cleaned.
    let r = c
        .req(reqwest::Method::POST, &invoke)
        .header("x-custom", "kept")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "must-go")
        .header("proxy-authorization", "Basic c2VjcmV0")
        .json(&json!({"name": "proxy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let request_id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let seen: Value = r.json().await.unwrap();
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["path"], "/");
    assert_eq!(seen["body"], json!({"name": "proxy"}));
    let h = &seen["headers"];
    assert!(h.get("authorization").is_none(), "token leaked: {h}");
    assert!(h.get("proxy-authorization").is_none(), "{h}");
    assert!(
        h.get("x-hop").is_none(),
        "connection-listed header leaked: {h}"
    );
    assert_eq!(h["x-custom"], "kept");
    assert_eq!(h["x-forwarded-for"], "127.0.0.1");
    assert_eq!(h["x-forwarded-proto"], "http");
    assert_eq!(h["x-request-id"], request_id.as_str());
    assert!(!request_id.is_empty());

    // A caller's request id is kept; path suffix and repeated query forwarded.
    let r = c
        .req(
            reqwest::Method::GET,
            &format!("{invoke}/orders/42?x=1&x=2&v=ok"),
        )
        .header("x-request-id", "req-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-request-id"], "req-123");
    let seen: Value = r.json().await.unwrap();
    assert_eq!(seen["method"], "GET");
    assert_eq!(seen["path"], "/orders/42");
    assert_eq!(seen["query"]["x"], json!(["1", "2"]));
    assert_eq!(seen["query"]["v"], "ok");
    assert_eq!(seen["headers"]["x-request-id"], "req-123");
    assert_eq!(seen["body"], Value::Null);

    // Other methods pass through too.
    for method in [
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
        reqwest::Method::PATCH,
    ] {
        let r = c
            .req(method.clone(), &format!("{invoke}/m"))
            .body("plain text")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{method}");
        let seen: Value = r.json().await.unwrap();
        assert_eq!(seen["method"], method.as_str());
        assert_eq!(seen["text_len"], 10);
    }

    // The function's own status and headers come back.
    let r = c
        .req(reqwest::Method::GET, &format!("{invoke}/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(r.headers()["x-fn"], "yes");
    assert_eq!(r.text().await.unwrap(), "made");

    // A large body is streamed through intact (8 MiB).
    let big = "x".repeat(8 * 1024 * 1024);
    let r = c
        .req(reqwest::Method::POST, &format!("{invoke}/big"))
        .header("content-type", "text/plain")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let seen: Value = r.json().await.unwrap();
    assert_eq!(seen["text_len"], big.len());

    // Past the function's timeout: 504 upstream_timeout, after about 1 s.
    let started = Instant::now();
    let r = c
        .req(reqwest::Method::GET, &format!("{invoke}/sleep"))
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(r.status().as_u16(), 504);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_timeout");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("1 s"),
        "{body}"
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");

    // And the function still answers afterwards.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (code, text) = c.invoke("echo", &json!({"again": true})).await;
        if code == 200 {
            let seen: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(seen["body"]["again"], true);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no answer after the timeout: {code} {text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn sigterm_lets_inflight_invocations_finish_and_exits_zero() {
    let mut op = Operator::start();
    let c = op.client("graceful");
    c.ensure().await;
    let (code, body) = c
        .create(json!({
            "name": "slow", "runtime": "python3.11", "entrypoint": "main.handler",
            "timeout_sec": 10
        }))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = c.upload("slow", zip_of(&[("main.py", ECHO)])).await;
    assert_eq!(code, 202, "{body}");
    c.wait_phase("slow", Phase::Ready, Duration::from_secs(60))
        .await;

    let url = c.url(&format!(
        "{}/sleep",
        paths::function_invoke(&c.namespace, "slow")
    ));
    let inflight = tokio::spawn(c.http.get(url).bearer_auth(&c.token).send());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut child = op.child.take().expect("running");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };

    // The request that was running gets its answer.
    let r = inflight.await.unwrap().expect("in-flight request answered");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.text().await.unwrap(), "\"late\"");

    // The operator exits 0 and removes its address file.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}; log:\n{}", op.log());
    assert!(!op.data_dir.join("operator.addr").exists());
    // New connections are refused once it is gone.
    assert!(
        reqwest::get(format!("{}/healthz", op.base_url))
            .await
            .is_err()
    );
}

/// Invocation bodies are bounded (16 MiB): a declared or streamed larger body
/// is a 413 JSON error that never reaches the function, a body at the limit
/// goes through whole, and the operator keeps serving.
#[tokio::test]
async fn invoke_bodies_over_the_limit_are_413() {
    use sless_wire::limits::INVOKE_BODY_MAX_BYTES as LIMIT;
    let op = Operator::start();
    let c = op.client("proxy-limit-user");
    c.ensure().await;
    let (code, body) = c
        .create(json!({"name": "echo", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = c.upload("echo", zip_of(&[("main.py", ECHO)])).await;
    assert_eq!(code, 202, "{body}");
    c.wait_phase("echo", Phase::Ready, Duration::from_secs(60))
        .await;
    let invoke = paths::function_invoke(&c.namespace, "echo");

    let at_limit = "a".repeat(LIMIT);
    let r = c
        .req(reqwest::Method::POST, &invoke)
        .header("content-type", "text/plain")
        .body(at_limit)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let seen: Value = r.json().await.unwrap();
    assert_eq!(seen["text_len"], LIMIT, "the whole body arrived");

    // Declared too large (Content-Length).
    let r = c
        .req(reqwest::Method::POST, &invoke)
        .header("content-type", "text/plain")
        .body("b".repeat(LIMIT + 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["error"]["code"], "payload_too_large", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("request body")),
        "{err}"
    );

    // Streamed without a length (chunked) past the limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..=LIMIT / (1024 * 1024))
        .map(|_| Ok(vec![b'c'; 1024 * 1024]))
        .collect();
    let r = c
        .req(reqwest::Method::POST, &invoke)
        .header("content-type", "text/plain")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await;
    match r {
        Ok(r) => assert_eq!(r.status().as_u16(), 413),
        // The operator may answer and close before the client finished
        // sending; then the client only sees the connection end.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }

    // Still serving.
    let (code, body) = c.invoke("echo", &json!({"after": true})).await;
    assert_eq!(code, 200, "{body}");
}
