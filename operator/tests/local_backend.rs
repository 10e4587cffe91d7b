//! The local backend through the `Backend` trait, with real zips, real
//! builds (pip, npm), real Python and Node processes and real HTTP.

mod support;

use sless_operator::api::proxy_body::LimitedBody;
use sless_operator::backend::{Backend, CodeBundle, InvokeTarget};
use sless_operator::codezip;
use sless_operator::local::{LocalBackend, LocalOptions, pid_file};
use sless_wire::function::{FunctionSpec, LogKind};
use sless_wire::{Function, Phase, Runtime, UpdateFunction};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const NS: &str = "sless-0123abcd";

async fn backend(dir: &Path) -> LocalBackend {
    let mut opts = LocalOptions::new(dir);
    opts.stop_grace = Duration::from_secs(3);
    let b = LocalBackend::start(opts).await.expect("start backend");
    b.ensure_namespace(NS).await.expect("ensure");
    b
}

fn spec(runtime: Runtime, entrypoint: &str) -> FunctionSpec {
    FunctionSpec {
        runtime,
        entrypoint: entrypoint.into(),
        env_vars: Default::default(),
        secret_env_vars: Default::default(),
        memory_mb: 256,
        timeout_sec: 30,
        min_instances: 0,
        idle_timeout_sec: 300,
    }
}

fn bundle(zip: Vec<u8>) -> CodeBundle {
    use sha2::Digest;
    codezip::inspect(&zip).expect("zip passes inspection");
    CodeBundle {
        sha256: hex::encode(sha2::Sha256::digest(&zip)),
        zip: zip.into(),
        source_hash: Some("src-hash".into()),
    }
}

/// A zip of `(path, bytes)` entries.
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

async fn wait_phase(b: &LocalBackend, name: &str, want: Phase, timeout: Duration) -> Function {
    let deadline = Instant::now() + timeout;
    loop {
        let f = b.get_function(NS, name).await.expect("get");
        if f.status.phase == want {
            return f;
        }
        if f.status.phase == Phase::Failed && want != Phase::Failed {
            let log = b.read_logs(NS, name, LogKind::Build, None).await.unwrap();
            panic!("{name} failed: {:?}\nbuild log:\n{log}", f.status.message);
        }
        if Instant::now() > deadline {
            let log = b.read_logs(NS, name, LogKind::Build, None).await.unwrap();
            panic!(
                "{name} not {want:?} after {timeout:?}: {:?}\nbuild log:\n{log}",
                f.status
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// POSTs a JSON body to `t` as the proxy would: with the target's own
/// client when it has one (a process on a unix socket), else over TCP.
async fn post(t: &InvokeTarget, body: &serde_json::Value) -> Result<(u16, String), String> {
    let Some(client) = &t.client else {
        let r = reqwest::Client::new()
            .post(format!("{}/", t.base_url))
            .json(body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        return Ok((status, r.text().await.map_err(|e| e.to_string())?));
    };
    let body = LimitedBody::new(
        axum::body::Body::from(body.to_string()),
        None,
        Default::default(),
        Default::default(),
    );
    let req = axum::http::Request::post(format!("{}/", t.base_url))
        .header("content-type", "application/json")
        .body(body)
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(Duration::from_secs(30), client.request(req))
        .await
        .map_err(|_| "no answer within 30 s".to_string())?
        .map_err(|e| e.to_string())?;
    let status = answer.status().as_u16();
    let bytes = axum::body::to_bytes(axum::body::Body::new(answer.into_body()), usize::MAX)
        .await
        .map_err(|e| e.to_string())?;
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// Invokes through the backend's target with a JSON body.
async fn invoke(b: &LocalBackend, name: &str, body: &serde_json::Value) -> (u16, String) {
    let t = b.invoke_target(NS, name).await.expect("invoke target");
    post(&t, body).await.expect("invoke")
}

/// Invokes once, `None` on any transport error or when not ready.
async fn try_invoke(b: &LocalBackend, name: &str) -> Option<(u16, String)> {
    let t = b.invoke_target(NS, name).await.ok()?;
    post(&t, &serde_json::json!({})).await.ok()
}

/// Invokes until it answers 200 (the process may be restarting).
async fn invoke_until_ok(
    b: &LocalBackend,
    name: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(t) = b.invoke_target(NS, name).await
            && let Ok((200, text)) = post(&t, body).await
        {
            return serde_json::from_str(&text).expect("json answer");
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not answer within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn read_pid(data_dir: &Path, name: &str) -> u32 {
    let text = std::fs::read_to_string(pid_file(data_dir, NS, name)).expect("pid file");
    text.split_whitespace().next().unwrap().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; look at its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_node_functions_serve_update_and_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;

    for (name, runtime, entry, zip) in [
        (
            "py",
            Runtime::Python311,
            "main.handler",
            support::python_hello_zip(),
        ),
        (
            "js",
            Runtime::Nodejs20,
            "index.handler",
            support::node_hello_zip(),
        ),
    ] {
        let f = b
            .create_function(NS, name, spec(runtime, entry))
            .await
            .unwrap();
        assert_eq!(f.status.phase, Phase::Pending);
        assert!(matches!(
            b.create_function(NS, name, spec(runtime, entry)).await,
            Err(sless_operator::Error::AlreadyExists { .. })
        ));
        let f = b.upload_code(NS, name, bundle(zip)).await.unwrap();
        assert_eq!(f.status.phase, Phase::Building);
        assert_eq!(f.status.source_hash.as_deref(), Some("src-hash"));
    }
    for (name, rt) in [("py", "python"), ("js", "node")] {
        let f = wait_phase(&b, name, Phase::Ready, Duration::from_secs(60)).await;
        let sha = f.status.code_sha256.clone().unwrap();
        assert_eq!(
            f.status.image_ref.as_deref(),
            Some(format!("local/{NS}/{name}:{}", &sha[..12]).as_str())
        );
        assert!(f.status.last_built_at.is_some());
        assert!(tmp.path().join("code").join(format!("{sha}.zip")).is_file());
        let (code, body) = invoke(&b, name, &serde_json::json!({"name": "Ada"})).await;
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["message"], "hello, Ada");
        assert_eq!(v["runtime"], rt);
    }

    // Uploading the same code again changes nothing: no second build.
    let f = b
        .upload_code(NS, "py", bundle(support::python_hello_zip()))
        .await
        .unwrap();
    assert_eq!(f.status.phase, Phase::Ready);
    let log = b.read_logs(NS, "py", LogKind::Build, None).await.unwrap();
    assert_eq!(log.matches("=== build of").count(), 1, "{log}");

    // An env update restarts the process with the new value, no rebuild.
    for name in ["py", "js"] {
        let update = UpdateFunction {
            env_vars: Some([("GREETING".to_string(), "howdy".to_string())].into()),
            ..Default::default()
        };
        let f = b.update_function(NS, name, update).await.unwrap();
        assert_eq!(
            f.spec.env_vars.get("GREETING").map(String::as_str),
            Some("howdy")
        );
        assert_eq!(f.spec.memory_mb, 256, "partial update keeps other fields");
        wait_phase(&b, name, Phase::Ready, Duration::from_secs(30)).await;
        let (code, body) = invoke(&b, name, &serde_json::json!({"name": "Bo"})).await;
        assert_eq!(code, 200);
        assert!(body.contains("howdy, Bo"), "{body}");
        let log = b.read_logs(NS, name, LogKind::Build, None).await.unwrap();
        assert_eq!(log.matches("=== build of").count(), 1, "no rebuild: {log}");
    }

    let list: Vec<String> = b
        .list_functions(NS)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(list, ["js", "py"]);

    // Delete: process gone, get and invoke NotFound, dirs removed.
    let pid = read_pid(tmp.path(), "py");
    b.delete_function(NS, "py").await.unwrap();
    assert!(matches!(
        b.get_function(NS, "py").await,
        Err(sless_operator::Error::NotFound { .. })
    ));
    assert!(matches!(
        b.invoke_target(NS, "py").await,
        Err(sless_operator::Error::NotFound { .. })
    ));
    assert!(!alive(pid), "the deleted function's process {pid} is gone");
    assert!(!tmp.path().join("builds").join(NS).join("py").exists());
    assert!(!tmp.path().join("logs").join(NS).join("py").exists());
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_namespace_is_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let err = b
        .create_function(
            "sless-ffffffff",
            "f",
            spec(Runtime::Python311, "main.handler"),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sless-ffffffff"), "{err}");
    assert!(!b.ensure_namespace(NS).await.unwrap().created);
    b.shutdown().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_requirements_are_installed_and_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let wheel = tiny_wheel();
    let zip = zip_bytes(&[
        (
            "main.py",
            b"import tinydep\n\ndef handler(event):\n    return {'dep': tinydep.VALUE}\n",
        ),
        ("requirements.txt", b"./tinydep-1.0-py3-none-any.whl\n"),
        ("tinydep-1.0-py3-none-any.whl", &wheel),
    ]);
    b.create_function(NS, "deps", spec(Runtime::Python311, "main.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "deps", bundle(zip)).await.unwrap();
    wait_phase(&b, "deps", Phase::Ready, Duration::from_secs(120)).await;
    let (code, body) = invoke(&b, "deps", &serde_json::json!({})).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("from tinydep"), "{body}");
    let log = b.read_logs(NS, "deps", LogKind::Build, None).await.unwrap();
    assert!(log.contains("pip install"), "{log}");
    // The cache is per namespace: deps/python/<ns>/<key>.
    let cached: Vec<_> = std::fs::read_dir(tmp.path().join("deps/python").join(NS))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(cached.len(), 1, "one cache dir, no leftovers");
    assert!(cached[0].path().join("tinydep/__init__.py").is_file());
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_file_tarball_dependency_is_installed() {
    let tmp = tempfile::tempdir().unwrap();
    // Build the tarball the way `npm pack` lays it out: package/...
    let pkg = tmp.path().join("tarball/package");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"tinydep","version":"1.0.0","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("index.js"), "exports.value = 'from tinydep';\n").unwrap();
    let tgz = tmp.path().join("tinydep-1.0.0.tgz");
    let st = std::process::Command::new("tar")
        .arg("czf")
        .arg(&tgz)
        .arg("-C")
        .arg(tmp.path().join("tarball"))
        .arg("package")
        .status()
        .unwrap();
    assert!(st.success());
    let tgz = std::fs::read(&tgz).unwrap();
    let zip = zip_bytes(&[
        ("index.js", b"const dep = require('tinydep');\nexports.handler = () => ({ dep: dep.value });\n"),
        ("package.json", br#"{"name":"fn","version":"1.0.0","dependencies":{"tinydep":"file:./tinydep-1.0.0.tgz"}}"#),
        ("tinydep-1.0.0.tgz", &tgz),
    ]);
    let data = tmp.path().join("data");
    let b = backend(&data).await;
    b.create_function(NS, "njs", spec(Runtime::Nodejs20, "index.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "njs", bundle(zip)).await.unwrap();
    wait_phase(&b, "njs", Phase::Ready, Duration::from_secs(120)).await;
    let (code, body) = invoke(&b, "njs", &serde_json::json!({})).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("from tinydep"), "{body}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_entrypoint_fails_visibly() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    b.create_function(NS, "bad", spec(Runtime::Python311, "main.nope"))
        .await
        .unwrap();
    b.upload_code(NS, "bad", bundle(support::python_hello_zip()))
        .await
        .unwrap();
    let f = wait_phase(&b, "bad", Phase::Failed, Duration::from_secs(60)).await;
    let msg = f.status.message.unwrap();
    assert!(msg.contains("main.nope"), "{msg}");
    assert!(msg.contains("has no attribute 'nope'"), "{msg}");
    let log = b.read_logs(NS, "bad", LogKind::Build, None).await.unwrap();
    assert!(log.contains("main.nope"), "{log}");
    assert!(matches!(
        b.invoke_target(NS, "bad").await,
        Err(sless_operator::Error::NotReady(_))
    ));
    // It stays Failed (no retry loop) ...
    tokio::time::sleep(Duration::from_secs(2)).await;
    let f = b.get_function(NS, "bad").await.unwrap();
    assert_eq!(f.status.phase, Phase::Failed);
    assert_eq!(log.matches("=== build of").count(), 1);
    // ... until a spec update fixes it (no rebuild needed).
    let f = b
        .update_function(
            NS,
            "bad",
            UpdateFunction {
                entrypoint: Some("main.handler".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(f.status.phase, Phase::Building);
    wait_phase(&b, "bad", Phase::Ready, Duration::from_secs(30)).await;

    // Node: a missing module is named too.
    b.create_function(NS, "badjs", spec(Runtime::Nodejs20, "app.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "badjs", bundle(support::node_hello_zip()))
        .await
        .unwrap();
    let f = wait_phase(&b, "badjs", Phase::Failed, Duration::from_secs(60)).await;
    let msg = f.status.message.unwrap();
    assert!(
        msg.contains("app.handler") && msg.contains("not found"),
        "{msg}"
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_is_restarted() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    b.create_function(NS, "py", spec(Runtime::Python311, "main.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "py", bundle(support::python_hello_zip()))
        .await
        .unwrap();
    wait_phase(&b, "py", Phase::Ready, Duration::from_secs(60)).await;
    let pid = read_pid(tmp.path(), "py");
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let v = invoke_until_ok(
        &b,
        "py",
        &serde_json::json!({"name": "again"}),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(v["message"], "hello, again");
    let f = b.get_function(NS, "py").await.unwrap();
    assert_eq!(f.status.phase, Phase::Ready);
    assert!(f.status.restarts >= 1, "{:?}", f.status);
    assert!(f.status.message.unwrap_or_default().contains("restart"));
    assert_ne!(read_pid(tmp.path(), "py"), pid);
    let run = b.read_logs(NS, "py", LogKind::Run, None).await.unwrap();
    assert!(run.contains("restarting"), "{run}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_kills_the_process() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let zip = support::zip_of(&[(
        "main.py",
        "hog = []\n\ndef handler(event):\n    hog.append(bytearray(200 * 1024 * 1024))\n    import time; time.sleep(5)\n    return 'survived'\n",
    )]);
    let mut s = spec(Runtime::Python311, "main.handler");
    s.memory_mb = 64;
    b.create_function(NS, "hog", s).await.unwrap();
    b.upload_code(NS, "hog", bundle(zip)).await.unwrap();
    wait_phase(&b, "hog", Phase::Ready, Duration::from_secs(60)).await;
    let t = b.invoke_target(NS, "hog").await.unwrap();
    // The watchdog kills the process mid-request: the connection drops.
    let r = post(&t, &serde_json::json!({})).await;
    assert!(
        r.map(|(status, _)| status != 200).unwrap_or(true),
        "the process must not survive"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let run = b.read_logs(NS, "hog", LogKind::Run, None).await.unwrap();
        if run.contains("killed: RSS") && run.contains("exceeds memory_mb 64") {
            break;
        }
        assert!(Instant::now() < deadline, "no kill in the run log:\n{run}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_of_the_backend_brings_functions_back() {
    let tmp = tempfile::tempdir().unwrap();
    let pid;
    {
        let b = backend(tmp.path()).await;
        b.create_function(NS, "js", spec(Runtime::Nodejs20, "index.handler"))
            .await
            .unwrap();
        b.upload_code(NS, "js", bundle(support::node_hello_zip()))
            .await
            .unwrap();
        wait_phase(&b, "js", Phase::Ready, Duration::from_secs(60)).await;
        pid = read_pid(tmp.path(), "js");
        b.shutdown().await;
        assert!(!alive(pid), "shutdown stops function processes");
    }
    let b = backend(tmp.path()).await;
    let v = invoke_until_ok(
        &b,
        "js",
        &serde_json::json!({"name": "back"}),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(v["message"], "hello, back");
    let f = b.get_function(NS, "js").await.unwrap();
    assert_eq!(f.status.phase, Phase::Ready);
    assert_eq!(f.status.source_hash.as_deref(), Some("src-hash"));
    let log = b.read_logs(NS, "js", LogKind::Build, None).await.unwrap();
    assert_eq!(
        log.matches("=== build of").count(),
        1,
        "no rebuild on restart: {log}"
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_parallel_invocations() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let zip = support::zip_of(&[(
        "main.py",
        "import time\n\ndef handler(event, context):\n    time.sleep(0.2)\n    return {'n': event['body']['n'] * 2}\n",
    )]);
    b.create_function(NS, "par", spec(Runtime::Python311, "main.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "par", bundle(zip)).await.unwrap();
    wait_phase(&b, "par", Phase::Ready, Duration::from_secs(60)).await;
    let t = b.invoke_target(NS, "par").await.unwrap();
    let started = Instant::now();
    let calls = (0..40).map(|n| {
        let t = &t;
        async move {
            let (status, text) = post(t, &serde_json::json!({"n": n})).await.unwrap();
            assert_eq!(status, 200, "{text}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["n"], n * 2);
        }
    });
    futures_util::future::join_all(calls).await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "invocations ran in parallel: {:?}",
        started.elapsed()
    );
    b.shutdown().await;
}

/// A `python` that hangs in `pip install` (recording its pid) and runs the
/// real python3 otherwise.
fn hanging_pip_python(dir: &Path) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let pid_file = dir.join("pip.pid");
    let script = dir.join("python-hanging-pip");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"-m\" ] && [ \"$2\" = \"pip\" ]; then echo $$ > {}; exec sleep 120; fi\nexec python3 \"$@\"\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script.to_string_lossy().into_owned(), pid_file)
}

async fn wait_pid_file(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "pip never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_dead(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "build process {pid} still alive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newer_upload_and_delete_cancel_a_running_build() {
    let tmp = tempfile::tempdir().unwrap();
    let (python, pip_pid) = hanging_pip_python(tmp.path());
    let mut opts = LocalOptions::new(tmp.path().join("data"));
    opts.python = python;
    let b = LocalBackend::start(opts).await.unwrap();
    b.ensure_namespace(NS).await.unwrap();
    let slow = zip_bytes(&[
        ("main.py", b"def handler(event):\n    return 'slow'\n"),
        ("requirements.txt", b"anything==1.0\n"),
    ]);
    let fast = zip_bytes(&[("main.py", b"def handler(event):\n    return 'fast'\n")]);

    // A newer upload replaces the hanging build and kills pip.
    b.create_function(NS, "f", spec(Runtime::Python311, "main.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "f", bundle(slow.clone())).await.unwrap();
    let pid = wait_pid_file(&pip_pid).await;
    assert!(alive(pid));
    let f = b.upload_code(NS, "f", bundle(fast)).await.unwrap();
    assert_eq!(f.status.phase, Phase::Building);
    wait_dead(pid).await;
    wait_phase(&b, "f", Phase::Ready, Duration::from_secs(30)).await;
    let (code, body) = invoke(&b, "f", &serde_json::json!({})).await;
    assert_eq!((code, body.as_str()), (200, "\"fast\""));

    // A spec update that breaks the entrypoint fails it and stops serving.
    b.update_function(
        NS,
        "f",
        UpdateFunction {
            entrypoint: Some("main.gone".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let f = wait_phase(&b, "f", Phase::Failed, Duration::from_secs(30)).await;
    assert!(f.status.message.unwrap().contains("main.gone"));
    assert!(b.invoke_target(NS, "f").await.is_err());

    // A delete kills a running build too.
    std::fs::remove_file(&pip_pid).unwrap();
    b.create_function(NS, "g", spec(Runtime::Python311, "main.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "g", bundle(slow)).await.unwrap();
    let pid = wait_pid_file(&pip_pid).await;
    b.delete_function(NS, "g").await.unwrap();
    wait_dead(pid).await;
    assert!(matches!(
        b.get_function(NS, "g").await,
        Err(sless_operator::Error::NotFound { .. })
    ));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_backend_per_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let err = LocalBackend::start(LocalOptions::new(tmp.path()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("in use by another"), "{err}");
    b.shutdown().await;
    drop(b);
    let b = backend(tmp.path()).await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_change_rebuilds() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let zip = zip_bytes(&[
        ("main.py", b"def handler(event):\n    return 'python'\n"),
        ("main.js", b"exports.handler = () => 'node';\n"),
    ]);
    b.create_function(NS, "poly", spec(Runtime::Python311, "main.handler"))
        .await
        .unwrap();
    b.upload_code(NS, "poly", bundle(zip)).await.unwrap();
    wait_phase(&b, "poly", Phase::Ready, Duration::from_secs(60)).await;
    assert_eq!(
        invoke(&b, "poly", &serde_json::json!({})).await.1,
        "\"python\""
    );
    let f = b
        .update_function(
            NS,
            "poly",
            UpdateFunction {
                runtime: Some("nodejs20".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(f.status.phase, Phase::Building);
    // The old process keeps serving until the new one is ready.
    let mut answers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let f = b.get_function(NS, "poly").await.unwrap();
        if let Some((200, body)) = try_invoke(&b, "poly").await {
            answers.push(body);
        }
        if f.status.phase == Phase::Ready && answers.last().map(String::as_str) == Some("\"node\"")
        {
            break;
        }
        assert_ne!(f.status.phase, Phase::Failed, "{:?}", f.status);
        assert!(Instant::now() < deadline, "no node answer: {answers:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = b.read_logs(NS, "poly", LogKind::Build, None).await.unwrap();
    assert!(log.contains("for nodejs20"), "{log}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_interrupted_by_a_restart_is_redone() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (python, pip_pid) = hanging_pip_python(tmp.path());
    let zip = zip_bytes(&[
        (
            "main.py",
            b"import tinydep\n\ndef handler(event):\n    return tinydep.VALUE\n",
        ),
        ("requirements.txt", b"./tinydep-1.0-py3-none-any.whl\n"),
        ("tinydep-1.0-py3-none-any.whl", &tiny_wheel()),
    ]);
    {
        let mut opts = LocalOptions::new(&data);
        opts.python = python;
        let b = LocalBackend::start(opts).await.unwrap();
        b.ensure_namespace(NS).await.unwrap();
        b.create_function(NS, "f", spec(Runtime::Python311, "main.handler"))
            .await
            .unwrap();
        b.upload_code(NS, "f", bundle(zip)).await.unwrap();
        let pid = wait_pid_file(&pip_pid).await;
        b.shutdown().await;
        wait_dead(pid).await;
    }
    let b = LocalBackend::start(LocalOptions::new(&data)).await.unwrap();
    wait_phase(&b, "f", Phase::Ready, Duration::from_secs(120)).await;
    assert_eq!(
        invoke(&b, "f", &serde_json::json!({})).await.1,
        "\"from tinydep\""
    );
    // No half-built dependency dir was left or used.
    for e in std::fs::read_dir(data.join("deps/python").join(NS))
        .unwrap()
        .flatten()
    {
        assert!(!e.file_name().to_string_lossy().starts_with(".tmp-"));
    }
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_function_sees_only_its_own_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backend(tmp.path()).await;
    let zip = support::zip_of(&[(
        "main.py",
        "import os\n\ndef handler(event):\n    return dict(os.environ)\n",
    )]);
    let mut s = spec(Runtime::Python311, "main.handler");
    s.env_vars = [("B_VAR", "2"), ("A_VAR", "1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s.timeout_sec = 12;
    b.create_function(NS, "env", s).await.unwrap();
    b.upload_code(NS, "env", bundle(zip)).await.unwrap();
    let f = wait_phase(&b, "env", Phase::Ready, Duration::from_secs(60)).await;
    let (code, body) = invoke(&b, "env", &serde_json::json!({})).await;
    assert_eq!(code, 200);
    let env: std::collections::BTreeMap<String, String> = serde_json::from_str(&body).unwrap();
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "A_VAR",
        "B_VAR",
        "SLESS_ENTRYPOINT",
        "SLESS_FUNCTION",
        "SLESS_NAMESPACE",
        "SLESS_CODE_DIR",
        "SLESS_HOST",
        "SLESS_PORT",
        // Where it listens (run/sockets/<n>.sock of the data dir).
        "SLESS_SOCKET",
        "SLESS_TIMEOUT_SEC",
        "SLESS_MEMORY_MB",
        // CPython may set this itself (PEP 538 locale coercion).
        "LC_CTYPE",
    ];
    // A pyenv shim (as on some dev machines) adds its own variables.
    let shim = |k: &str| {
        k.starts_with("PYENV")
            || k.starts_with("_PYENV")
            || ["PWD", "OLDPWD", "SHLVL", "_"].contains(&k)
    };
    for k in [
        "RUST_BACKTRACE",
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "SSL_CERT_FILE",
        "TF_CLI_CONFIG_FILE",
    ] {
        assert!(!env.contains_key(k), "{k} leaked in");
    }
    for k in env.keys().filter(|k| !shim(k)) {
        assert!(
            allowed.contains(&k.as_str()),
            "unexpected variable {k} leaked in: {env:?}"
        );
    }
    assert_eq!(env["A_VAR"], "1");
    assert_eq!(env["SLESS_ENTRYPOINT"], "main.handler");
    assert_eq!(env["SLESS_FUNCTION"], "env");
    assert_eq!(env["SLESS_NAMESPACE"], NS);
    assert_eq!(env["SLESS_HOST"], "127.0.0.1");
    assert_eq!(env["SLESS_TIMEOUT_SEC"], "12");
    assert_eq!(env["SLESS_MEMORY_MB"], "256");
    assert!(
        env["SLESS_SOCKET"].contains("/run/sockets/") && env["SLESS_SOCKET"].ends_with(".sock"),
        "{env:?}"
    );
    let sha = f.status.code_sha256.unwrap();
    assert!(env["SLESS_CODE_DIR"].ends_with(&format!("builds/{NS}/env/{}/src", &sha[..12])));
    b.shutdown().await;
}
