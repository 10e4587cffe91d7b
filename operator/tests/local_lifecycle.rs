//! End to end through the real `sless-operator` binary and its REST API with
//! the local backend: Python and Node functions from zips, updates, deletes,
//! dependencies, crashes of a function and of the operator, failures, and
//! parallel invocations.

mod support;

use reqwest::Method;
use serde_json::json;
use sless_wire::{Phase, paths};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Client, Operator};

const READY: Duration = Duration::from_secs(90);

async fn create_and_upload(c: &Client, name: &str, runtime: &str, entry: &str, zip: Vec<u8>) {
    let (code, body) = c
        .create(json!({"name": name, "runtime": runtime, "entrypoint": entry}))
        .await;
    assert_eq!(code, 201, "create {name}: {body}");
    let (code, body) = c.upload(name, zip).await;
    assert!((200..300).contains(&code), "upload {name}: {code} {body}");
}

/// Invokes until a 200 answer that satisfies `ok`, returning its JSON.
async fn invoke_until(
    c: &Client,
    name: &str,
    body: &serde_json::Value,
    timeout: Duration,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    loop {
        let (code, text) = c.invoke(name, body).await;
        if code == 200
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && ok(&v)
        {
            return v;
        }
        let last = (code, text);
        assert!(
            Instant::now() < deadline,
            "{name}: no good answer within {timeout:?}; last {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pid_of(op: &Operator, ns: &str, name: &str) -> u32 {
    let path = op.data_dir.join("run").join(ns).join(format!("{name}.pid"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Some(pid) = text.split_whitespace().next().and_then(|p| p.parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid file {}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still alive");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes whose working directory is under `dir`.
fn processes_under(dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok())
            && std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
            && alive(pid)
        {
            out.push(pid);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_node_functions_end_to_end() {
    let op = Operator::start();
    let c = op.client("alice");
    c.ensure().await;
    create_and_upload(
        &c,
        "hello-py",
        "python3.11",
        "main.handler",
        support::python_hello_zip(),
    )
    .await;
    create_and_upload(
        &c,
        "hello-js",
        "nodejs20",
        "index.handler",
        support::node_hello_zip(),
    )
    .await;
    for (name, rt) in [("hello-py", "python"), ("hello-js", "node")] {
        let f = c.wait_phase(name, Phase::Ready, READY).await;
        assert!(
            f["status"]["image_ref"]
                .as_str()
                .unwrap()
                .starts_with(&format!("local/{}/{name}:", c.namespace))
        );
        let (code, text) = c.invoke(name, &json!({"name": "Ada"})).await;
        assert_eq!(code, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["message"], "hello, Ada");
        assert_eq!(v["runtime"], rt);
    }

    // Update env vars: the new value is served.
    for name in ["hello-py", "hello-js"] {
        let r = c
            .req(Method::PATCH, &paths::function(&c.namespace, name))
            .json(&json!({"env_vars": {"GREETING": "bonjour"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        invoke_until(&c, name, &json!({"name": "Zoe"}), READY, |v| {
            v["message"] == "bonjour, Zoe"
        })
        .await;
        let (_, f) = c.get(name).await;
        assert_eq!(f["spec"]["env_vars"]["GREETING"], "bonjour");
    }

    // Run logs and build logs are readable.
    let build = c.logs("hello-py", "build").await;
    assert!(build.contains("ready: pid"), "{build}");

    // Delete: 404 on get and invoke.
    for name in ["hello-py", "hello-js"] {
        let pid = pid_of(&op, &c.namespace, name);
        let r = c
            .req(Method::DELETE, &paths::function(&c.namespace, name))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "delete {name}: {}", r.status());
        assert_eq!(c.get(name).await.0, 404);
        assert_eq!(c.invoke(name, &json!({})).await.0, 404);
        wait_gone(pid);
    }
}

/// A minimal valid wheel for `tinydep` 1.0.
fn tiny_wheel() -> Vec<u8> {
    use base64::Engine;
    use sha2::Digest;
    let init = b"VALUE = 'from tinydep'\n".as_slice();
    let metadata = b"Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n".as_slice();
    let wheel =
        b"Wheel-Version: 1.0\nGenerator: sless-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            .as_slice();
    let rec = |path: &str, data: &[u8]| {
        let digest =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(data));
        format!("{path},sha256={digest},{}\n", data.len())
    };
    let record = format!(
        "{}{}{}tinydep-1.0.dist-info/RECORD,,\n",
        rec("tinydep/__init__.py", init),
        rec("tinydep-1.0.dist-info/METADATA", metadata),
        rec("tinydep-1.0.dist-info/WHEEL", wheel)
    );
    zip_bytes(&[
        ("tinydep/__init__.py", init),
        ("tinydep-1.0.dist-info/METADATA", metadata),
        ("tinydep-1.0.dist-info/WHEEL", wheel),
        ("tinydep-1.0.dist-info/RECORD", record.as_bytes()),
    ])
}

fn zip_bytes(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (path, data) in files {
            w.start_file(*path, opts).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap();
    }
    buf.into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_requirements_build_and_import() {
    let op = Operator::start();
    let c = op.client("bob");
    c.ensure().await;
    let wheel = tiny_wheel();
    let zip = zip_bytes(&[
        (
            "main.py",
            b"import tinydep\n\ndef handler(event, context):\n    return {'dep': tinydep.VALUE}\n",
        ),
        ("requirements.txt", b"./tinydep-1.0-py3-none-any.whl\n"),
        ("tinydep-1.0-py3-none-any.whl", &wheel),
    ]);
    create_and_upload(&c, "with-deps", "python3.11", "main.handler", zip).await;
    c.wait_phase("with-deps", Phase::Ready, READY).await;
    let (code, text) = c.invoke("with-deps", &json!({})).await;
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("from tinydep"), "{text}");
    let build = c.logs("with-deps", "build").await;
    assert!(build.contains("pip install"), "{build}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_survive_process_kills_and_operator_crashes() {
    let mut op = Operator::start();
    let c = op.client("carol");
    c.ensure().await;
    create_and_upload(
        &c,
        "py",
        "python3.11",
        "main.handler",
        support::python_hello_zip(),
    )
    .await;
    create_and_upload(
        &c,
        "js",
        "nodejs20",
        "index.handler",
        support::node_hello_zip(),
    )
    .await;
    let r = c
        .req(Method::PATCH, &paths::function(&c.namespace, "py"))
        .json(&json!({"env_vars": {"GREETING": "hi"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for name in ["py", "js"] {
        c.wait_phase(name, Phase::Ready, READY).await;
    }
    invoke_until(&c, "py", &json!({"name": "x"}), READY, |v| {
        v["message"] == "hi, x"
    })
    .await;

    // Kill the function's process: it comes back and answers.
    let pid = pid_of(&op, &c.namespace, "py");
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    // An answer may still come from the killed sandbox's last moments (a
    // pooled connection to it), before its exit is counted: wait for the
    // restart (counted, new pid file), then for the new process's answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, f) = c.get("py").await;
        let restarted = f["status"]["restarts"].as_u64().unwrap_or(0) >= 1;
        if restarted && pid_of(&op, &c.namespace, "py") != pid {
            break;
        }
        assert!(Instant::now() < deadline, "no restart after a kill: {f}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    invoke_until(&c, "py", &json!({"name": "y"}), READY, |v| {
        v["message"] == "hi, y"
    })
    .await;

    // kill -9 the operator: no function process is left behind ...
    let before: Vec<(String, String)> = ["py", "js"]
        .iter()
        .map(|n| (n.to_string(), pid_of(&op, &c.namespace, n).to_string()))
        .collect();
    let (_, py_before) = c.get("py").await;
    op.kill();
    for (_, pid) in &before {
        wait_gone(pid.parse().unwrap());
    }
    // A sandbox's processes die with its bwrap (PDEATHSIG, then the PID
    // namespace goes): a moment after the bwrap itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_under(&op.data_dir.join("builds")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        processes_under(&op.data_dir.join("builds")).is_empty(),
        "orphans left behind"
    );
    // ... and after a restart every Ready function answers again, data intact.
    op.spawn();
    let c = op.client("carol");
    invoke_until(&c, "py", &json!({"name": "z"}), READY, |v| {
        v["message"] == "hi, z"
    })
    .await;
    invoke_until(&c, "js", &json!({"name": "z"}), READY, |v| {
        v["message"] == "hello, z"
    })
    .await;
    let (code, py_after) = c.get("py").await;
    assert_eq!(code, 200);
    assert_eq!(py_after["spec"], py_before["spec"]);
    assert_eq!(
        py_after["status"]["code_sha256"],
        py_before["status"]["code_sha256"]
    );
    assert_eq!(py_after["created_at"], py_before["created_at"]);

    // A clean stop (SIGTERM) stops every function process.
    let pids: Vec<u32> = ["py", "js"]
        .iter()
        .map(|n| pid_of(&op, &c.namespace, n))
        .collect();
    op.stop();
    for pid in pids {
        wait_gone(pid);
    }
    assert!(processes_under(&op.data_dir.join("builds")).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_entrypoint_fails_the_function_visibly() {
    let op = Operator::start();
    let c = op.client("dave");
    c.ensure().await;
    create_and_upload(
        &c,
        "bad-py",
        "python3.11",
        "main.missing",
        support::python_hello_zip(),
    )
    .await;
    create_and_upload(
        &c,
        "bad-js",
        "nodejs20",
        "nomodule.handler",
        support::node_hello_zip(),
    )
    .await;
    for (name, entry) in [("bad-py", "main.missing"), ("bad-js", "nomodule.handler")] {
        let f = c.wait_phase(name, Phase::Failed, READY).await;
        let msg = f["status"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(entry), "{name}: {msg}");
        let build = c.logs(name, "build").await;
        assert!(build.contains(entry), "{build}");
        let (code, text) = c.invoke(name, &json!({})).await;
        assert!(code >= 400 && code != 500, "{code} {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_parallel_invocations_through_the_proxy() {
    let op = Operator::start();
    let c = op.client("erin");
    c.ensure().await;
    let zip = support::zip_of(&[(
        "main.py",
        "import time\n\ndef handler(event, context):\n    time.sleep(0.1)\n    return {'double': event['body']['n'] * 2}\n",
    )]);
    create_and_upload(&c, "par", "python3.11", "main.handler", zip).await;
    c.wait_phase("par", Phase::Ready, READY).await;
    let calls = (0..40).map(|n| {
        let c = &c;
        async move {
            let (code, text) = c.invoke("par", &json!({"n": n})).await;
            assert_eq!(code, 200, "{text}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["double"], n * 2);
        }
    });
    futures_util::future::join_all(calls).await;
}
