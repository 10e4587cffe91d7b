//! Acceptance tests: the real `terraform` CLI drives the freshly built
//! provider (through `dev_overrides`) against the real `sless-operator` with
//! its local backend, running real Python and Node processes.
//!
//! Gated on `TF_ACC=1` (Terraform's convention). Needs `target/debug/sless-operator`
//! (`cargo build -p sless-operator`; the README's test command builds every
//! binary first) and `terraform` on PATH or in `TERRAFORM`.
//!
//! Everything is hermetic: dependencies come from a local wheel and a local
//! npm package inside the function folders, never from PyPI or npm.

mod common;

use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn greetlib_wheel() -> Vec<u8> {
    let files = [
        (
            "greetlib/__init__.py",
            "def greet(greeting, name):\n    return '%s, %s!' % (greeting, name)\n",
        ),
        (
            "greetlib-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: greetlib\nVersion: 1.0\n",
        ),
        (
            "greetlib-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: sless-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (
            "greetlib-1.0.dist-info/RECORD",
            "greetlib/__init__.py,,\ngreetlib-1.0.dist-info/METADATA,,\ngreetlib-1.0.dist-info/WHEEL,,\ngreetlib-1.0.dist-info/RECORD,,\n",
        ),
    ];
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().last_modified_time(zip::DateTime::default());
    for (name, body) in files {
        w.start_file(name, opts).unwrap();
        w.write_all(body.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

const GOOD_REQUIREMENTS: &str = "--no-index\n./wheels/greetlib-1.0-py3-none-any.whl\n";
const BROKEN_REQUIREMENTS: &str = "--no-index\n./wheels/nothere-1.0-py3-none-any.whl\n";

fn python_main(version: u32) -> String {
    format!(
        "import os\nimport greetlib\n\n\ndef handler(event, context):\n    body = event.get('body') or {{}}\n    return {{'message': greetlib.greet(os.environ.get('GREETING', 'hello'), body.get('name', 'world')), 'runtime': 'python', 'version': {version}}}\n"
    )
}

fn write_sources(dir: &Path) {
    write(&dir.join("py/main.py"), python_main(1).as_bytes());
    write(
        &dir.join("py/requirements.txt"),
        GOOD_REQUIREMENTS.as_bytes(),
    );
    write(
        &dir.join("py/wheels/greetlib-1.0-py3-none-any.whl"),
        &greetlib_wheel(),
    );
    write(
        &dir.join("node/index.js"),
        b"const { greet } = require('greet');\nexports.handler = async (event) => {\n  const body = event.body || {};\n  return { message: greet(process.env.GREETING || 'hello', body.name || 'world'), runtime: 'node' };\n};\n",
    );
    write(
        &dir.join("node/package.json"),
        br#"{"name": "acc-node", "version": "1.0.0", "private": true, "dependencies": {"greet": "file:./vendor/greet"}}"#,
    );
    write(
        &dir.join("node/vendor/greet/package.json"),
        br#"{"name": "greet", "version": "1.0.0", "main": "index.js"}"#,
    );
    write(
        &dir.join("node/vendor/greet/index.js"),
        b"exports.greet = (greeting, name) => `${greeting}, ${name}!`;\n",
    );
    write(
        &dir.join("entry/main.py"),
        b"def handler(event, context):\n    return 'ok'\n",
    );
}

fn main_tf(node_greeting: &str, entry: Option<&str>) -> String {
    let header = tf_header();
    let mut tf = format!(
        r#"{header}
data "sless_namespace" "me" {{}}

resource "sless_function" "py" {{
  name       = "acc-py"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/py"
  env_vars = {{
    GREETING = "hello"
  }}
}}

resource "sless_function" "node" {{
  name       = "acc-node"
  runtime    = "nodejs20"
  entrypoint = "index.handler"
  source_dir = "${{path.module}}/node"
  memory_mb  = 256
  env_vars = {{
    GREETING = "{node_greeting}"
  }}
}}

output "namespace" {{
  value = data.sless_namespace.me.namespace
}}

output "py_url" {{
  value = sless_function.py.invoke_url
}}

output "node_url" {{
  value = sless_function.node.invoke_url
}}
"#
    );
    if let Some(ep) = entry {
        tf.push_str(&format!(
            r#"
resource "sless_function" "entry" {{
  name       = "acc-entry"
  runtime    = "python3.11"
  entrypoint = "{ep}"
  source_dir = "${{path.module}}/entry"
}}
"#
        ));
    }
    tf
}

/// A loopback stand-in for the cloud API that answers every request with 401
/// and records the `Authorization` header it got.
fn rejecting_cloud() -> (String, std::sync::Arc<std::sync::Mutex<Option<String>>>) {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/me", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok() {
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if line.to_ascii_lowercase().starts_with("authorization:") {
                    let value = line["authorization:".len()..].trim().to_string();
                    *seen2.lock().unwrap() = Some(value);
                }
                line.clear();
            }
            let body = r#"{"error":"token expired"}"#;
            let mut s = stream;
            let _ = write!(
                s,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

/// A client of the operator's API for the test's own checks.
struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    ns: String,
}

impl Api {
    async fn invoke(&self, url: &str, name: &str) -> Value {
        let r = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .json(&json!({ "name": name }))
            .send()
            .await
            .expect("invoke");
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        assert!(status.is_success(), "invoke {url}: {status} {body}");
        serde_json::from_str(&body).unwrap_or_else(|_| panic!("invoke {url}: not JSON: {body}"))
    }

    async fn get(&self, name: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!(
                "{}{}",
                self.base,
                sless_wire::paths::function(&self.ns, name)
            ))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("get");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn patch(&self, name: &str, body: Value) {
        let r = self
            .http
            .patch(format!(
                "{}{}",
                self.base,
                sless_wire::paths::function(&self.ns, name)
            ))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("patch");
        assert!(r.status().is_success(), "patch {name}: {}", r.status());
    }

    async fn create(&self, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!(
                "{}{}",
                self.base,
                sless_wire::paths::functions(&self.ns)
            ))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("create");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn delete(&self, name: &str) {
        let r = self
            .http
            .delete(format!(
                "{}{}",
                self.base,
                sless_wire::paths::function(&self.ns, name)
            ))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("delete");
        assert!(r.status().is_success(), "delete {name}: {}", r.status());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.get(name).await.0 != 404 {
            assert!(
                Instant::now() < deadline,
                "{name} still there 30 s after DELETE"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[cfg(unix)]
fn set_mtime(p: &Path, secs: i64) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let t = libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    let times = [t, t];
    assert_eq!(
        unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) },
        0
    );
}

fn all_files(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_lifecycle_with_real_terraform() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "acceptance@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    let api = Api {
        http: reqwest::Client::new(),
        base: op.base_url.clone(),
        token: token.clone(),
        ns: ns.clone(),
    };
    write_sources(&tf.dir);
    tf.write_main(&main_tf("hello", None));

    // 1. Apply a Python and a Node function: both Ready and answering.
    tf.apply();
    let out = tf.outputs();
    assert_eq!(
        out["namespace"]["value"],
        json!(ns),
        "the data source names the namespace"
    );
    let py_url = out["py_url"]["value"].as_str().unwrap().to_string();
    let node_url = out["node_url"]["value"].as_str().unwrap().to_string();
    assert_eq!(
        py_url,
        format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::function_invoke(&ns, "acc-py")
        )
    );
    let r = api.invoke(&py_url, "acc").await;
    assert_eq!(r["message"], "hello, acc!", "{r}");
    assert_eq!(r["version"], 1);
    let r = api.invoke(&node_url, "acc").await;
    assert_eq!(r["message"], "hello, acc!", "{r}");
    assert_eq!(r["runtime"], "node");
    for name in ["acc-py", "acc-node"] {
        let (code, f) = api.get(name).await;
        assert_eq!(
            (code, f["status"]["phase"].as_str()),
            (200, Some("Ready")),
            "{f}"
        );
    }
    assert_eq!(api.get("acc-node").await.1["spec"]["memory_mb"], 256);

    // 2. Right after apply: no changes.
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan right after apply must be empty:\n{plan}");

    // 3. New mtimes everywhere and a chmod g+w: still no changes.
    for f in all_files(&tf.dir.join("py"))
        .into_iter()
        .chain(all_files(&tf.dir.join("node")))
    {
        set_mtime(&f, 1_500_000_000);
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let p = tf.dir.join("py/main.py");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode | 0o020)).unwrap();
    }
    let (code, plan) = tf.plan_code();
    assert_eq!(
        code, 0,
        "mtimes and group bits must not show as changes:\n{plan}"
    );

    // 4. Edit the Python code and change the Node env var in one plan.
    let node_built_before = api.get("acc-node").await.1["status"]["last_built_at"].clone();
    assert!(node_built_before.is_string(), "node has a last_built_at");
    write(&tf.dir.join("py/main.py"), python_main(2).as_bytes());
    tf.write_main(&main_tf("bonjour", None));
    let out = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-input=false",
        "-no-color",
        "-out=tfplan",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json", "tfplan"])).unwrap();
    let changes = shown["resource_changes"]
        .as_array()
        .expect("resource_changes");
    let change_of = |addr: &str| {
        changes
            .iter()
            .find(|c| c["address"] == addr)
            .unwrap_or_else(|| panic!("{addr} not in plan: {shown}"))["change"]
            .clone()
    };
    let py = change_of("sless_function.py");
    assert_eq!(
        py["actions"],
        json!(["update"]),
        "code change is an in-place update"
    );
    let (known, unknown) = changed_attrs(&py);
    assert_eq!(known, ["code_hash"], "only code_hash changes: {py}");
    assert_eq!(unknown, ["image_ref", "last_built_at", "phase"], "{py}");
    let node = change_of("sless_function.node");
    assert_eq!(
        node["actions"],
        json!(["update"]),
        "env change is an in-place update"
    );
    let (known, unknown) = changed_attrs(&node);
    assert_eq!(known, ["env_vars"], "{node}");
    assert!(unknown.is_empty(), "an env change rebuilds nothing: {node}");
    tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    let r = api.invoke(&py_url, "acc").await;
    assert_eq!(r["version"], 2, "the new code answers: {r}");
    let r = api.invoke(&node_url, "acc").await;
    assert_eq!(
        r["message"], "bonjour, acc!",
        "the function sees the new env: {r}"
    );
    let node_after = api.get("acc-node").await.1;
    assert_eq!(
        node_after["status"]["last_built_at"], node_built_before,
        "an env change must not rebuild"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "no changes after the update:\n{plan}");

    // 4b. Scaling settings: an in-place update of just those two attributes
    //     that keeps the running process (no restart, no rebuild).
    //    The code update above replaced the process; the old one may still
    //    be in its SIGTERM grace period, so wait until it is gone.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut py_pids = function_pids(&ns, "acc-py");
    while py_pids.len() != 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        py_pids = function_pids(&ns, "acc-py");
    }
    assert_eq!(py_pids.len(), 1, "one acc-py process: {py_pids:?}");
    let scaled = main_tf("bonjour", None).replacen(
        "  source_dir = \"${path.module}/py\"\n",
        "  source_dir = \"${path.module}/py\"\n  min_instances    = 1\n  idle_timeout_sec = 120\n",
        1,
    );
    tf.write_main(&scaled);
    let out = tf.run(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json", "tfplan"])).unwrap();
    let py = shown["resource_changes"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["address"] == "sless_function.py"))
        .map(|c| c["change"].clone())
        .unwrap_or_else(|| panic!("sless_function.py not in plan: {shown}"));
    let (known, unknown) = changed_attrs(&py);
    assert_eq!(known, ["idle_timeout_sec", "min_instances"], "{py}");
    assert!(
        unknown.is_empty(),
        "a scaling change rebuilds nothing: {py}"
    );
    tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    let (_, f) = api.get("acc-py").await;
    assert_eq!(f["spec"]["min_instances"], 1, "{f}");
    assert_eq!(f["spec"]["idle_timeout_sec"], 120, "{f}");
    assert_eq!(f["status"]["instances"], 1, "{f}");
    assert_eq!(
        function_pids(&ns, "acc-py"),
        py_pids,
        "the process kept running"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "no changes after the scaling update:\n{plan}");

    // 5. A broken requirements.txt and a wrong entrypoint: apply fails with
    //    the pip error and the entrypoint named; fixing both succeeds.
    write(
        &tf.dir.join("py/requirements.txt"),
        BROKEN_REQUIREMENTS.as_bytes(),
    );
    tf.write_main(&main_tf("bonjour", Some("main.nope")));
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let all = text(&out);
    eprintln!("expected failure of apply with broken code:\n{all}");
    assert!(
        !out.status.success(),
        "apply with broken code must fail:\n{all}"
    );
    assert!(!flat(&all).contains("TERRAFORM CRASH"), "{all}");
    assert!(
        flat(&all).contains("nothere-1.0-py3-none-any.whl"),
        "the pip error is in the diagnostic:\n{all}"
    );
    assert!(
        flat(&all).contains("Failed"),
        "the phase is in the diagnostic:\n{all}"
    );
    assert!(
        flat(&all).contains("main.nope"),
        "the wrong entrypoint is named:\n{all}"
    );
    write(
        &tf.dir.join("py/requirements.txt"),
        GOOD_REQUIREMENTS.as_bytes(),
    );
    tf.write_main(&main_tf("bonjour", Some("main.handler")));
    tf.apply();
    let r = api.invoke(&py_url, "fixed").await;
    assert_eq!(r["message"], "hello, fixed!", "{r}");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "no changes after the fix:\n{plan}");

    // 6. Drift: deleted behind Terraform's back, the plan recreates it;
    //    env changed behind its back, the plan changes it back.
    api.delete("acc-node").await;
    api.patch("acc-py", json!({ "env_vars": { "GREETING": "hacked" } }))
        .await;
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 2, "{plan}");
    assert!(
        flat(&plan).contains("sless_function.py will be updated in-place"),
        "{plan}"
    );
    assert!(
        flat(&plan).contains(r#""GREETING" = "hacked" -> "hello""#),
        "{plan}"
    );
    assert!(
        flat(&plan).contains("sless_function.node will be created"),
        "{plan}"
    );

    // 7. `state rm` + apply: a clear "already exists" error, no adoption.
    tf.ok(&["state", "rm", "sless_function.py"]);
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    eprintln!("expected failure of apply after state rm:\n{all}");
    assert!(flat(&all).contains("already exists"), "{all}");
    assert!(flat(&all).contains("acc-py"), "{all}");
    assert_eq!(
        api.get("acc-node").await.0,
        200,
        "the other function was recreated"
    );

    // 7b. What an apply interrupted between the operator storing a create and
    // answering it leaves: a function that never got code, here with an older
    // configuration (step 6's env value, another memory limit), as when the
    // configuration changed between the interrupted apply and this one. The
    // next apply adopts it (with a warning), gives it this configuration and
    // its code, instead of "already exists" (step 7: a function with code is
    // never adopted).
    let (_, old) = api.get("acc-py").await;
    api.delete("acc-py").await;
    let mut body = old["spec"].clone();
    body["name"] = json!("acc-py");
    body["memory_mb"] = json!(256);
    body.as_object_mut()
        .expect("a spec object")
        .remove("secret_env_vars");
    assert_eq!(body["env_vars"]["GREETING"], "hacked", "{body}");
    let (code, left) = api.create(body).await;
    assert_eq!(code, 201, "{left}");
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        flat(&all).contains("Adopted function acc-py left by an interrupted apply"),
        "{all}"
    );
    let (_, f) = api.get("acc-py").await;
    assert_eq!(
        f["status"]["phase"], "Ready",
        "adopted and given its code: {f}"
    );
    assert_eq!(f["spec"]["env_vars"]["GREETING"], "hello", "{f}");
    assert_eq!(f["spec"]["memory_mb"], 128, "{f}");
    let r = api.invoke(&py_url, "adopted").await;
    assert_eq!(r["message"], "hello, adopted!", "{r}");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "after adopting, the plan is clean:\n{plan}");

    // 8. Destroy: the operator answers 404 and the processes are gone.
    assert!(
        !function_pids(&ns, "acc-node").is_empty(),
        "acc-node runs a process"
    );
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    for name in ["acc-py", "acc-node", "acc-entry"] {
        assert_eq!(
            api.get(name).await.0,
            404,
            "{name} is gone from the operator"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = function_pids(&ns, "acc-node");
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of acc-node still running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 2, "after destroy the plan creates again:\n{plan}");
    drop(op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_clear() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let tf = Tf::new(root.path(), &op.base_url, "not-a-jwt");
    write(
        &tf.dir.join("src/main.py"),
        b"def handler(e, c):\n    return 1\n",
    );
    let header = tf_header_with("");
    tf.write_main(&format!(
        r#"{header}
resource "sless_function" "bad" {{
  name       = "Bad_Name"
  runtime    = "ruby3.0"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/missing"
  memory_mb  = 1
}}
"#
    ));
    // Validation: every local mistake, each pointing at its attribute.
    let out = tf.run(&["validate", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(!flat(&all).contains("TERRAFORM CRASH"), "{all}");
    for needle in [
        "Bad_Name",
        "ruby3.0",
        "python3.11",
        "missing",
        "memory_mb",
        "4096",
    ] {
        assert!(flat(&all).contains(needle), "{needle} not in:\n{all}");
    }
    // A malformed token is reported as such at configure.
    let header = tf_header_with("");
    tf.write_main(&format!(
        r#"{header}
data "sless_namespace" "me" {{}}
"#
    ));
    let out = tf.run(&["plan", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        flat(&all).contains("Invalid token") && flat(&all).contains("not a JWT"),
        "{all}"
    );
    // A token the operator did not issue is rejected by the operator.
    use base64::Engine;
    let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let forged = format!(
        "{}.{}.{}",
        e.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
        e.encode(r#"{"sub":"mallory","exp":4102444800}"#),
        e.encode("forged")
    );
    let mut tf2 = Tf {
        dir: tf.dir.clone(),
        env: tf.env.clone(),
    };
    tf2.env.retain(|(k, _)| k != "SLESS_TOKEN");
    tf2.env.push(("SLESS_TOKEN".into(), forged));
    let out = tf2.run(&["plan", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        flat(&all).contains("the operator rejected the token"),
        "{all}"
    );
    // With nubes_endpoint, the cloud checks the token first; a 401 there stops
    // everything with a clear message (a stand-in for the cloud API on loopback).
    let (cloud_url, seen_auth) = rejecting_cloud();
    let token = op.token("someone");
    let mut tf4 = Tf {
        dir: tf.dir.clone(),
        env: tf.env.clone(),
    };
    tf4.env.retain(|(k, _)| k != "SLESS_TOKEN");
    tf4.env.push(("SLESS_TOKEN".into(), token.clone()));
    let header = tf_header_with(&format!("  nubes_endpoint = \"{cloud_url}\"\n"));
    tf4.write_main(&format!(
        r#"{header}
data "sless_namespace" "me" {{}}
"#
    ));
    let out = tf4.run(&["plan", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        flat(&all).contains("rejected the token") && flat(&all).contains("token expired"),
        "{all}"
    );
    let auth = seen_auth.lock().unwrap().clone();
    assert_eq!(
        auth.as_deref(),
        Some(format!("Bearer {token}").as_str()),
        "the token is sent to the cloud"
    );
    let header = tf_header_with("");
    tf.write_main(&format!(
        r#"{header}
data "sless_namespace" "me" {{}}
"#
    ));
    // An unreachable endpoint is named.
    let token = op.token("someone");
    let mut tf3 = Tf {
        dir: tf.dir.clone(),
        env: tf.env.clone(),
    };
    tf3.env
        .retain(|(k, _)| k != "SLESS_TOKEN" && k != "SLESS_ENDPOINT");
    tf3.env.push(("SLESS_TOKEN".into(), token));
    tf3.env
        .push(("SLESS_ENDPOINT".into(), "http://127.0.0.1:9".into()));
    let out = tf3.run(&["plan", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        flat(&all).contains("Cannot reach the sless operator")
            && flat(&all).contains("127.0.0.1:9"),
        "{all}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_function_times_out_saying_what_was_seen() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "slow@example.com";
    let token = op.token(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    // Importing the module takes 20 s, so the function stays in its start-up.
    write(
        &tf.dir.join("slow/main.py"),
        b"import time\ntime.sleep(20)\n\n\ndef handler(event, context):\n    return 'late'\n",
    );
    let header = tf_header_with("");
    tf.write_main(&format!(
        r#"{header}
resource "sless_function" "slow" {{
  name             = "acc-slow"
  runtime          = "python3.11"
  entrypoint       = "main.handler"
  source_dir       = "${{path.module}}/slow"
  wait_timeout_sec = 2
}}
"#
    ));
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        flat(&all).contains("Timed out waiting for function acc-slow"),
        "{all}"
    );
    assert!(flat(&all).contains("gave up after 2 s"), "{all}");
    assert!(flat(&all).contains("last seen: phase Building"), "{all}");
    // The half-created function is tracked (tainted), so destroy removes it,
    // even while it is still starting.
    let state = tf.ok(&["state", "list"]);
    assert!(state.contains("sless_function.slow"), "{state}");
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let api = Api {
        http: reqwest::Client::new(),
        base: op.base_url.clone(),
        token,
        ns: sless_wire::namespace_for_sub(sub),
    };
    assert_eq!(api.get("acc-slow").await.0, 404);
}
