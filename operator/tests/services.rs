//! Services end to end through the real `sless-operator` binary with the
//! local backend: a Python http.server service answers on its public URL;
//! memory and env updates apply in place without a rebuild; a process killed
//! by hand comes back and the restart is counted; delete makes the URL 404;
//! a bad spec is a 400 naming the field.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::paths;
use std::time::{Duration, Instant};
use support::{Client, Operator, zip_of};

const READY: Duration = Duration::from_secs(90);

const APP: &str = r#"import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({
            "greeting": os.environ.get("GREETING", "hello"),
            "pid": os.getpid(),
            "path": self.path,
            "port": os.environ["PORT"],
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        print("request", self.path, flush=True)

print("listening on", os.environ["HOST"], os.environ["PORT"], flush=True)
HTTPServer((os.environ["HOST"], int(os.environ["PORT"])), Handler).serve_forever()
"#;

async fn wait_ready(c: &Client, name: &str) -> Value {
    let deadline = Instant::now() + READY;
    loop {
        let (code, body) = c
            .call(Method::GET, &paths::service(&c.namespace, name), None)
            .await;
        assert_eq!(code, 200, "{body}");
        match body["status"]["phase"].as_str() {
            Some("Ready") => return body,
            Some("Failed") => panic!("service {name} failed: {body}"),
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "service {name} not Ready: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GETs `url` (no token) until a 200 JSON answer satisfies `ok`.
async fn get_until(url: &str, timeout: Duration, ok: impl Fn(&Value) -> bool) -> Value {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + timeout;
    loop {
        let last = match http.get(url).send().await {
            Ok(r) => {
                let code = r.status().as_u16();
                let text = r.text().await.unwrap_or_default();
                if code == 200
                    && let Ok(v) = serde_json::from_str::<Value>(&text)
                    && ok(&v)
                {
                    return v;
                }
                format!("{code} {text}")
            }
            Err(e) => e.to_string(),
        };
        assert!(
            Instant::now() < deadline,
            "{url}: no good answer within {timeout:?}; last {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn a_service_answers_updates_in_place_heals_and_goes_away() {
    let op = Operator::start_unsandboxed();
    let c = op.client("service-user");
    let (code, body) = c
        .call(
            Method::POST,
            &paths::services(&c.namespace),
            Some(
                json!({"name": "web", "runtime": "python3.11", "entrypoint": "app.py",
                    "env_vars": {"GREETING": "hello"}, "health_path": "/healthz"}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let url = body["status"]["url"].as_str().expect("url").to_string();
    assert_eq!(
        url,
        format!("{}/s/{}/web", op.base_url, c.namespace),
        "an absolute public URL"
    );
    let (code, body) = c
        .put_code(
            &paths::service_code(&c.namespace, "web"),
            zip_of(&[("app.py", APP)]),
        )
        .await;
    assert_eq!(code, 202, "{body}");
    let svc = wait_ready(&c, "web").await;
    let built_at = svc["status"]["last_built_at"].clone();
    assert!(built_at.is_string(), "{svc}");

    // The public URL needs no token and passes path and query.
    let first = get_until(&format!("{url}/hello/there?x=1"), READY, |_| true).await;
    assert_eq!(first["greeting"], "hello");
    assert_eq!(first["path"], "/hello/there?x=1");

    // memory_mb + env: a new process with the new env, no rebuild.
    let (code, body) = c
        .call(
            Method::PATCH,
            &paths::service(&c.namespace, "web"),
            Some(json!({"memory_mb": 256, "env_vars": {"GREETING": "bonjour"}})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["memory_mb"], 256);
    let second = get_until(&url, READY, |v| v["greeting"] == "bonjour").await;
    assert_ne!(second["pid"], first["pid"], "a new process");
    let svc = wait_ready(&c, "web").await;
    assert_eq!(
        svc["status"]["last_built_at"], built_at,
        "no rebuild: {svc}"
    );
    let build_log = c
        .req(Method::GET, &paths::service_logs(&c.namespace, "web"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        build_log.matches("=== build of").count(),
        1,
        "built once: {build_log}"
    );
    let old_pid = first["pid"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(old_pid) {
        assert!(
            Instant::now() < deadline,
            "the old process {old_pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Killed by hand: it comes back, and the restart is counted. Requests
    // made while it restarts are held for the new process: none is refused
    // with a 503 (a request already on its way to the dead one may get 502).
    let pid = second["pid"].as_u64().unwrap();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answers = Vec::new();
    let third = loop {
        let r = http.get(&url).send().await.unwrap();
        let code = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        if code == 200 {
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["pid"] != pid {
                break v;
            }
        }
        answers.push(format!("{code} {text}"));
        assert!(
            Instant::now() < deadline,
            "not back within 30 s after the kill: {answers:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        !answers.iter().any(|a| a.starts_with("503")),
        "requests refused with 503 while the process restarted: {answers:?}"
    );
    assert_eq!(third["greeting"], "bonjour");
    let (_, svc) = c
        .call(Method::GET, &paths::service(&c.namespace, "web"), None)
        .await;
    assert!(svc["status"]["restarts"].as_u64().unwrap() >= 1, "{svc}");
    assert_eq!(svc["status"]["phase"], "Ready", "{svc}");
    let run_log = c
        .req(Method::GET, &paths::service_logs(&c.namespace, "web"))
        .query(&[("kind", "run")])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(run_log.contains("listening on 127.0.0.1"), "{run_log}");
    assert!(run_log.contains("restarting"), "{run_log}");

    // Delete: the process is gone and the URL answers 404.
    let (code, _) = c
        .call(Method::DELETE, &paths::service(&c.namespace, "web"), None)
        .await;
    assert_eq!(code, 204);
    let last = third["pid"].as_u64().unwrap();
    assert!(!alive(last), "process {last} survived the delete");
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let (code, _) = c
        .call(Method::GET, &paths::service(&c.namespace, "web"), None)
        .await;
    assert_eq!(code, 404);
    assert!(
        !op.data_dir
            .join("builds")
            .join(&c.namespace)
            .join("svc.web")
            .exists()
    );
}

#[tokio::test]
async fn a_service_from_a_command_and_bad_specs() {
    let op = Operator::start();
    let c = op.client("service-cmd-user");
    let services = paths::services(&c.namespace);
    let bad = [
        (
            json!({"name": "s", "runtime": "python3.11", "entrypoint": "app.py", "command": ["python3", "app.py"]}),
            "command",
        ),
        (
            json!({"name": "s", "runtime": "python3.11", "entrypoint": "../app.py"}),
            "entrypoint",
        ),
        (json!({"name": "s", "runtime": "python3.11"}), "entrypoint"),
        (
            json!({"name": "s", "runtime": "python3.11", "entrypoint": "app.py", "memory_mb": 1}),
            "memory_mb",
        ),
        (
            json!({"name": "s", "runtime": "python3.11", "entrypoint": "app.py", "health_path": "health"}),
            "health_path",
        ),
        (
            json!({"name": "s", "runtime": "cobol", "entrypoint": "app.py"}),
            "runtime",
        ),
    ];
    for (body, field) in bad {
        let (code, err) = c.call(Method::POST, &services, Some(body.clone())).await;
        assert_eq!(code, 400, "{body} -> {err}");
        assert_eq!(err["error"]["field"], field, "{body} -> {err}");
    }
    let (code, body) = c.call(Method::POST,
        &services,
        Some(
            json!({"name": "cmd", "runtime": "python3.11", "command": ["python3", "-u", "app.py"]}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = c
        .call(
            Method::POST,
            &services,
            Some(json!({"name": "cmd", "runtime": "python3.11", "entrypoint": "app.py"})),
        )
        .await;
    assert_eq!(code, 409, "{body}");
    // Not ready yet: 503 on the public URL, not 502.
    let url = format!("{}/s/{}/cmd", op.base_url, c.namespace);
    assert_eq!(reqwest::get(&url).await.unwrap().status().as_u16(), 503);
    let (code, _) = c
        .put_code(
            &paths::service_code(&c.namespace, "cmd"),
            zip_of(&[("app.py", APP)]),
        )
        .await;
    assert_eq!(code, 202);
    wait_ready(&c, "cmd").await;
    let v = get_until(&url, READY, |_| true).await;
    assert_eq!(v["path"], "/");
    // A PATCH that breaks the spec is a 400, the service keeps running.
    let (code, err) = c
        .call(
            Method::PATCH,
            &paths::service(&c.namespace, "cmd"),
            Some(json!({"command": [""]})),
        )
        .await;
    assert_eq!(code, 400, "{err}");
    assert_eq!(err["error"]["field"], "command");
    get_until(&url, READY, |_| true).await;
    // An unknown service's URL is a 404.
    let r = reqwest::get(format!("{}/s/{}/nope/x", op.base_url, c.namespace))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

const NODE_APP: &str = r#"const http = require("http");
http
  .createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ runtime: "node", version: process.env.APP_VERSION || "1", pid: process.pid, path: req.url }));
  })
  .listen(Number(process.env.PORT), process.env.HOST, () => console.log("node service up"));
"#;

#[tokio::test]
async fn a_node_service_rebuilds_on_new_code_and_survives_an_operator_restart() {
    let mut op = Operator::start();
    let c = op.client("service-node-user");
    let (code, body) = c.call(Method::POST,
        &paths::services(&c.namespace),
        Some(json!({"name": "api", "runtime": "nodejs20", "entrypoint": "server.js", "timeout_sec": 5})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let url = body["status"]["url"].as_str().unwrap().to_string();
    c.put_code(
        &paths::service_code(&c.namespace, "api"),
        zip_of(&[("server.js", NODE_APP)]),
    )
    .await;
    wait_ready(&c, "api").await;
    let v = get_until(&format!("{url}/x"), READY, |_| true).await;
    assert_eq!(v["runtime"], "node");
    assert_eq!(v["path"], "/x");

    // New code: rebuilt and served.
    let v2 = NODE_APP.replace("process.env.APP_VERSION || \"1\"", "\"2\"");
    let (code, body) = c
        .put_code(
            &paths::service_code(&c.namespace, "api"),
            zip_of(&[("server.js", &v2)]),
        )
        .await;
    assert_eq!(code, 202, "{body}");
    get_until(&url, READY, |v| v["version"] == "2").await;
    let build_log = c
        .req(Method::GET, &paths::service_logs(&c.namespace, "api"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(build_log.contains("=== build of"), "{build_log}");
    let svc = wait_ready(&c, "api").await;
    assert_eq!(
        svc["status"]["restarts"], 0,
        "new code resets restarts: {svc}"
    );

    // The operator stops and comes back: the service is served again, same URL
    // path, without a rebuild.
    let builds = build_log.matches("=== build of").count();
    op.stop();
    op.spawn();
    let c = op.client("service-node-user");
    let after = wait_ready(&c, "api").await;
    assert_eq!(
        after["status"]["last_built_at"],
        svc["status"]["last_built_at"]
    );
    let url = after["status"]["url"].as_str().unwrap().to_string();
    let v = get_until(&url, READY, |_| true).await;
    assert_eq!(v["version"], "2");
    let build_log = c
        .req(Method::GET, &paths::service_logs(&c.namespace, "api"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        build_log.matches("=== build of").count(),
        builds,
        "no rebuild after the restart: {build_log}"
    );
}
