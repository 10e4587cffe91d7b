//! Acceptance tests of `sless_service` with the real terraform CLI, provider
//! and operator (gated on `TF_ACC=1`, see `acceptance.rs`): the public URL
//! answers, memory and env changes apply in place without a rebuild, and a
//! process killed by hand is restarted.

mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

/// A plain HTTP server on `$PORT` answering with its env and pid.
const APP_PY: &str = r#"import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({'greeting': os.environ.get('GREETING'), 'pid': os.getpid(), 'path': self.path}).encode()
        self.send_response(200)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer((os.environ.get('HOST', '127.0.0.1'), int(os.environ['PORT'])), Handler).serve_forever()
"#;

/// Marks the service's processes so the test can find them in /proc.
const TAG: &str = "SVC_TAG=acc-svc-process";

fn config(greeting: &str, memory_mb: u32) -> String {
    format!(
        r#"{header}
resource "sless_service" "web" {{
  name       = "acc-svc"
  runtime    = "python3.11"
  entrypoint = "app.py"
  source_dir = "${{path.module}}/app"
  memory_mb  = {memory_mb}
  env_vars = {{
    GREETING = "{greeting}"
    SVC_TAG  = "acc-svc-process"
  }}
}}

output "url" {{
  value = sless_service.web.url
}}
"#,
        header = tf_header()
    )
}

async fn get(url: &str) -> Option<Value> {
    let r = reqwest::Client::new()
        .get(format!("{url}/hello"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_lifecycle_with_real_terraform() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "services@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("app/app.py"), APP_PY.as_bytes());
    tf.write_main(&config("hello", 128));
    let http = reqwest::Client::new();
    let api_get = async || -> Value {
        http.get(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::service(&ns, "acc-svc")
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
    };

    // 1. Apply: the public URL answers without a token.
    tf.apply();
    let url = tf.outputs()["url"]["value"]
        .as_str()
        .expect("url output")
        .to_string();
    let got = get(&url).await.expect("the service answers");
    assert_eq!(got["greeting"], "hello", "{got}");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan right after apply must be empty:\n{plan}");

    // 2. memory_mb and an env var change in place, without a rebuild.
    let built_before = api_get().await["status"]["last_built_at"].clone();
    assert!(built_before.is_string(), "last_built_at is set");
    tf.write_main(&config("bonjour", 256));
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 2, "{plan}");
    assert!(
        flat(&plan).contains("sless_service.web will be updated in-place"),
        "{plan}"
    );
    tf.apply();
    let got = eventually(
        Duration::from_secs(30),
        "the new env var is served",
        || async { get(&url).await.filter(|v| v["greeting"] == "bonjour") },
    )
    .await;
    assert_eq!(got["path"], "/hello");
    let svc = api_get().await;
    assert_eq!(svc["spec"]["memory_mb"], 256, "{svc}");
    assert_eq!(
        svc["status"]["last_built_at"], built_before,
        "an env/memory change must not rebuild"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after the update must be empty:\n{plan}");

    // 3. Kill its process by hand: it answers again, from a new process.
    let old_pid = got["pid"].as_u64().unwrap();
    let pids = pids_with_env(&[TAG]);
    assert!(
        !pids.is_empty(),
        "the service's process is found by its env"
    );
    for pid in &pids {
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    let got = eventually(
        Duration::from_secs(60),
        "the killed service answers again",
        || async {
            get(&url)
                .await
                .filter(|v| v["pid"].as_u64() != Some(old_pid))
        },
    )
    .await;
    assert_eq!(got["greeting"], "bonjour", "{got}");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "a restart is not a change:\n{plan}");

    // 4. New code rebuilds in place and is served from the same URL.
    write(
        &tf.dir.join("app/app.py"),
        APP_PY
            .replace("'path': self.path", "'path': self.path, 'version': 2")
            .as_bytes(),
    );
    tf.apply();
    assert_eq!(
        tf.outputs()["url"]["value"],
        url.as_str(),
        "the URL is stable"
    );
    let got = get(&url).await.expect("the rebuilt service answers");
    assert_eq!(got["version"], 2, "{got}");
    assert_ne!(
        api_get().await["status"]["last_built_at"],
        built_before,
        "new code rebuilds"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after the rebuild must be empty:\n{plan}");

    // 5. Destroy: the URL answers 404 and no process is left.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 404);
    eventually(
        Duration::from_secs(10),
        "no service process left",
        || async { pids_with_env(&[TAG]).is_empty().then_some(()) },
    )
    .await;
}
