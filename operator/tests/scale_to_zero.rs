//! Scale to zero on the local backend, through the real operator binary in
//! its default strict sandbox: an idle function stops its process and stays
//! Ready; the first requests after that are held while exactly one process
//! starts; `min_instances = 1` never stops; scaling settings change without
//! a restart; an operator restart leaves functions at zero; a cron trigger
//! starts a function at zero; a cold-started process gets the same
//! environment, working directory and memory limit as the first one.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::{Phase, paths};
use std::time::{Duration, Instant};
use support::{Client, Operator, zip_of};

const READY: Duration = Duration::from_secs(90);

/// A handler that says which process answered (an id drawn at import), its
/// environment, working directory and memory limit as it sees them.
fn instance_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        r#"import os, uuid

INSTANCE = uuid.uuid4().hex

def handler(event, context):
    body = event.get("body") or {}
    if isinstance(body, dict) and body.get("hog_mb"):
        hog = bytearray(body["hog_mb"] * 1024 * 1024)
        for i in range(0, len(hog), 4096):
            hog[i] = 1
    print("handled by", INSTANCE, flush=True)
    if isinstance(body, dict) and body.get("read"):
        seen = {}
        for path in body["read"]:
            try:
                seen[path] = "read %d bytes" % len(open(path, "rb").read())
            except OSError as e:
                seen[path] = "blocked: %s" % type(e).__name__
        return {"seen": seen}
    return {
        "instance": INSTANCE,
        "greeting": os.environ.get("GREETING"),
        "memory_mb": os.environ.get("SLESS_MEMORY_MB"),
        "cwd": os.getcwd(),
        "uid": os.getuid(),
    }
"#,
    )])
}

async fn create(c: &Client, name: &str, extra: Value) -> Value {
    let mut body = json!({
        "name": name, "runtime": "python3.11", "entrypoint": "main.handler",
        "env_vars": {"GREETING": "hi"}, "memory_mb": 96,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (code, b) = c.create(body).await;
    assert_eq!(code, 201, "create {name}: {b}");
    let (code, b) = c.upload(name, instance_zip()).await;
    assert!((200..300).contains(&code), "upload {name}: {code} {b}");
    c.wait_phase(name, Phase::Ready, READY).await
}

/// PATCHes the function with `body`; returns the updated function (200 required).
async fn patch(c: &Client, name: &str, body: Value) -> Value {
    let (code, f) = c
        .call(
            Method::PATCH,
            &paths::function(&c.namespace, name),
            Some(body),
        )
        .await;
    assert_eq!(code, 200, "patch {name}: {f}");
    f
}

async fn invoke_json(c: &Client, name: &str) -> Value {
    let (code, text) = c.invoke(name, &json!({})).await;
    assert_eq!(code, 200, "invoke {name}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// Polls the function until `status.instances` is `n`; returns the body.
async fn wait_instances(c: &Client, name: &str, n: u64, timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let (code, body) = c.get(name).await;
        assert_eq!(code, 200, "get {name}: {body}");
        if body["status"]["instances"].as_u64() == Some(n) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: instances not {n} after {timeout:?}; last {body}\nrun log:\n{}",
            c.logs(name, "run").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pid_file(op: &Operator, c: &Client, name: &str) -> std::path::PathBuf {
    op.data_dir
        .join("run")
        .join(&c.namespace)
        .join(format!("{name}.pid"))
}

/// The host pid of the process serving `name` now (its pid file), if any.
fn serving_pid(op: &Operator, c: &Client, name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(pid_file(op, c, name)).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Processes whose command line contains `needle`.
fn procs_running(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains(needle)
        })
        .count()
}

/// Polls until no process's command line contains `needle`.
async fn wait_none_running(needle: &str, timeout: Duration, what: &str) {
    let deadline = Instant::now() + timeout;
    while procs_running(needle) > 0 {
        assert!(
            Instant::now() < deadline,
            "{what} still running after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_dead(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_function_scales_to_zero_and_the_first_requests_start_one_process() {
    let op = Operator::start();
    let c = op.client("scale-user");
    c.ensure().await;
    let f = create(&c, "idle", json!({"idle_timeout_sec": 2})).await;
    assert_eq!(f["spec"]["min_instances"], 0, "default min_instances: {f}");
    assert_eq!(f["spec"]["idle_timeout_sec"], 2);
    let first = invoke_json(&c, "idle").await;
    let pid1 = serving_pid(&op, &c, "idle").expect("a pid file while up");
    assert!(alive(pid1));

    // Two seconds without a request: the process goes, the function stays Ready.
    let at_zero = wait_instances(&c, "idle", 0, Duration::from_secs(15)).await;
    assert_eq!(at_zero["status"]["phase"], "Ready", "{at_zero}");
    wait_dead(pid1).await;
    assert!(!pid_file(&op, &c, "idle").exists(), "pid file left at zero");
    let run_log = c.logs("idle", "run").await;
    assert!(run_log.contains("scaled to zero"), "run log: {run_log}");

    // Eight requests at once: all held (no 503), all answered by one new process.
    let answers = futures_util::future::join_all((0..8).map(|_| invoke_json(&c, "idle"))).await;
    let instances: std::collections::BTreeSet<_> =
        answers.iter().map(|a| a["instance"].to_string()).collect();
    assert_eq!(instances.len(), 1, "one process answered all: {answers:?}");
    assert_ne!(answers[0]["instance"], first["instance"], "a new process");
    let pid2 = serving_pid(&op, &c, "idle").expect("a pid file after the cold start");
    assert!(alive(pid2) && pid2 != pid1);
    let run_log = c.logs("idle", "run").await;
    assert_eq!(
        run_log.matches("cold start: pid").count(),
        1,
        "exactly one cold start: {run_log}"
    );
    wait_instances(&c, "idle", 1, Duration::from_secs(5)).await;

    // It was forked by the namespace's pre-imported zygote, not started fresh.
    let cmdline = std::fs::read(format!("/proc/{pid2}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("zygote.py"),
        "not forked from the zygote: {:?}\nrun log:\n{run_log}",
        String::from_utf8_lossy(&cmdline)
    );
    eprintln!(
        "{}",
        run_log
            .lines()
            .filter(|l| l.contains("cold start"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The cold-started process sees what the first one saw, and its output
    // reaches the function's run log.
    let instance = answers[0]["instance"].as_str().unwrap().to_string();
    assert!(
        run_log.contains(&format!("handled by {instance}")),
        "run log: {run_log}"
    );
    for key in ["greeting", "memory_mb", "cwd", "uid"] {
        assert_eq!(
            answers[0][key], first[key],
            "{key} differs after a cold start"
        );
    }
    assert_eq!(answers[0]["greeting"], "hi");

    // A request in flight is never scaled down under: a slow stream of
    // requests spaced below the idle time keeps the same process.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let a = invoke_json(&c, "idle").await;
        assert_eq!(a["instance"], answers[0]["instance"]);
    }

    // Forked from its namespace's zygote, it still sees nothing of another
    // namespace, nor the operator's key or state.
    let other = op.client("scale-other");
    other.ensure().await;
    create(&other, "neighbour", json!({})).await;
    let theirs = op
        .data_dir
        .join("builds")
        .join(&other.namespace)
        .join("neighbour");
    let sha_dir = std::fs::read_dir(&theirs)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path().join("src/main.py"))
        .expect("the neighbour's build");
    let secrets = [
        sha_dir,
        op.data_dir.join("jwt-hs256.key"),
        op.data_dir.join("state.db"),
    ];
    let paths: Vec<String> = secrets.iter().map(|p| p.display().to_string()).collect();
    let (code, text) = c.invoke("idle", &json!({"read": paths})).await;
    assert_eq!(code, 200, "{text}");
    let seen: Value = serde_json::from_str(&text).unwrap();
    for p in &paths {
        let what = seen["seen"][p].as_str().unwrap_or_default();
        assert!(
            what.starts_with("blocked"),
            "a forked function read {p}: {seen}"
        );
    }

    // Its memory limit holds: past memory_mb it is killed, and says why.
    let (code, text) = c.invoke("idle", &json!({"hog_mb": 200})).await;
    assert!(
        code >= 500,
        "a 200 MiB allocation under memory_mb 96: {code} {text}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = c.logs("idle", "run").await;
        if log.contains("exceeds memory_mb 96") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no memory kill in the run log: {log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Deleting a function at zero leaves nothing running.
    wait_instances(&c, "idle", 0, Duration::from_secs(15)).await;
    let (code, _) = c
        .call(Method::DELETE, &paths::function(&c.namespace, "idle"), None)
        .await;
    assert_eq!(code, 204);
    assert!(!alive(pid2), "deleted, yet its process runs");

    // Stopping the operator stops the zygotes too.
    let zygote = op.data_dir.join("runtimes/zygote.py").display().to_string();
    assert!(
        procs_running(&zygote) > 0,
        "no zygote ran for this operator"
    );
    let mut op = op;
    op.stop();
    wait_none_running(
        &zygote,
        Duration::from_secs(10),
        "a zygote of a stopped operator",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_zygotes_and_warm_node_processes_stop_and_come_back_on_demand() {
    let op = Operator::start_with(&["--warm-idle-sec", "2"]);
    let c = op.client("scale-reap");
    c.ensure().await;
    let zygote = op.data_dir.join("runtimes/zygote.py").display().to_string();
    let warm_node = format!(
        "{}\0--warm",
        op.data_dir.join("runtimes/server.js").display()
    );
    create(&c, "py", json!({"idle_timeout_sec": 1})).await;
    create(&c, "busy", json!({"idle_timeout_sec": 1})).await;
    wait_instances(&c, "py", 0, Duration::from_secs(15)).await;
    wait_instances(&c, "busy", 0, Duration::from_secs(15)).await;

    // "busy" is forked from the zygote and kept up: the zygote outlives its
    // idle time while it has a running child (its children die with it).
    let forked = invoke_json(&c, "busy").await;
    patch(&c, "busy", json!({"idle_timeout_sec": 120})).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        procs_running(&zygote) > 0,
        "a zygote with a running child was stopped"
    );
    assert_eq!(
        invoke_json(&c, "busy").await["instance"],
        forked["instance"],
        "the forked function was restarted"
    );

    // Its last child gone, the idle zygote is stopped ...
    let (code, _) = c
        .call(Method::DELETE, &paths::function(&c.namespace, "busy"), None)
        .await;
    assert_eq!(code, 204);
    wait_none_running(&zygote, Duration::from_secs(15), "an idle zygote").await;
    // (The line is logged once the stop has returned.)
    let deadline = Instant::now() + Duration::from_secs(5);
    while !op.log().contains("stopped idle warm processes") {
        assert!(Instant::now() < deadline, "operator log:\n{}", op.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ... and the next cold start still answers (starting one again).
    let cold = invoke_json(&c, "py").await;
    assert!(cold["instance"].is_string(), "{cold}");
    assert!(c.logs("py", "run").await.contains("cold start: pid"));

    // A warm Node process nobody asks for is stopped too.
    let (code, b) = c
        .create(json!({
            "name": "nd", "runtime": "nodejs20", "entrypoint": "index.handler",
            "memory_mb": 128, "idle_timeout_sec": 1,
        }))
        .await;
    assert_eq!(code, 201, "{b}");
    let (code, b) = c.upload("nd", node_instance_zip()).await;
    assert!((200..300).contains(&code), "{code} {b}");
    c.wait_phase("nd", Phase::Ready, READY).await;
    wait_instances(&c, "nd", 0, Duration::from_secs(15)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while procs_running(&warm_node) == 0 {
        assert!(
            Instant::now() < deadline,
            "no warm Node process after a scale-down"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_none_running(
        &warm_node,
        Duration::from_secs(15),
        "an idle warm Node process",
    )
    .await;
    assert_eq!(invoke_json(&c, "nd").await["greeting"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_instances_one_never_stops_and_scaling_changes_need_no_restart() {
    let op = Operator::start();
    let c = op.client("scale-min");
    c.ensure().await;
    create(
        &c,
        "always",
        json!({"min_instances": 1, "idle_timeout_sec": 1}),
    )
    .await;
    let first = invoke_json(&c, "always").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (_, f) = c.get("always").await;
    assert_eq!(f["status"]["instances"], 1, "{f}");
    assert_eq!(
        invoke_json(&c, "always").await["instance"],
        first["instance"]
    );

    // min_instances 1 -> 0: applied in place (same process), then it idles out.
    let f = patch(
        &c,
        "always",
        json!({"min_instances": 0, "idle_timeout_sec": 2}),
    )
    .await;
    assert_eq!(
        f["status"]["phase"], "Ready",
        "no restart for a scaling change: {f}"
    );
    assert_eq!(
        invoke_json(&c, "always").await["instance"],
        first["instance"]
    );
    wait_instances(&c, "always", 0, Duration::from_secs(15)).await;

    // min_instances 0 -> 1 at zero: it starts without waiting for a request.
    patch(&c, "always", json!({"min_instances": 1})).await;
    wait_instances(&c, "always", 1, Duration::from_secs(15)).await;
    let pid = serving_pid(&op, &c, "always").expect("started without a request");
    assert!(alive(pid));

    // Out-of-range settings are refused, naming the field.
    for (body, field) in [
        (json!({"min_instances": 2}), "min_instances"),
        (json!({"idle_timeout_sec": 0}), "idle_timeout_sec"),
    ] {
        let (code, b) = c
            .call(
                Method::PATCH,
                &paths::function(&c.namespace, "always"),
                Some(body),
            )
            .await;
        assert_eq!(code, 400, "{b}");
        assert!(b.to_string().contains(field), "{b}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_restart_leaves_functions_at_zero_and_a_cron_trigger_starts_them() {
    let mut op = Operator::start();
    let c = op.client("scale-restart");
    c.ensure().await;
    create(&c, "sleepy", json!({})).await;
    create(&c, "kept", json!({"min_instances": 1})).await;
    op.stop();
    op.spawn();
    let c = op.client("scale-restart");

    // Both come back Ready; only min_instances = 1 has a process.
    wait_instances(&c, "kept", 1, Duration::from_secs(30)).await;
    let (_, f) = c.get("sleepy").await;
    assert_eq!(f["status"]["phase"], "Ready", "{f}");
    assert_eq!(f["status"]["instances"], 0, "{f}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(serving_pid(&op, &c, "sleepy"), None, "no process at zero");

    // A cron trigger's run starts it (and is recorded as a success).
    let (code, t) = c
        .call(
            Method::POST,
            &paths::triggers(&c.namespace),
            Some(json!({"name": "tick", "function": "sleepy", "type": "cron", "schedule": "*/1 * * * * *"})),
        )
        .await;
    assert_eq!(code, 201, "{t}");
    // The first finished run (polled often enough to see it first) was held
    // through the cold start and answered, not refused with a 503.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, t) = c
            .call(Method::GET, &paths::trigger(&c.namespace, "tick"), None)
            .await;
        if !t["status"]["last_run"].is_null() {
            assert_eq!(t["status"]["last_run"]["ok"], true, "first cron run: {t}");
            break;
        }
        assert!(Instant::now() < deadline, "no cron run: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_instances(&c, "sleepy", 1, Duration::from_secs(5)).await;
    // And an invoke reaches the same process.
    assert_eq!(invoke_json(&c, "sleepy").await["greeting"], "hi");
}

/// A Node handler that says which process answered and what it sees.
fn node_instance_zip() -> Vec<u8> {
    zip_of(&[(
        "index.js",
        r#"const crypto = require('node:crypto');
const INSTANCE = crypto.randomUUID();
exports.handler = async (event) => {
  console.log('handled by', INSTANCE);
  return {
    instance: INSTANCE,
    greeting: process.env.GREETING || null,
    memory_mb: process.env.SLESS_MEMORY_MB,
    cwd: process.cwd(),
    uid: process.getuid(),
    heap_mb: Math.round(require('node:v8').getHeapStatistics().heap_size_limit / 1048576),
  };
};
"#,
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cold_start_takes_a_warm_process_with_the_functions_environment() {
    let op = Operator::start();
    let c = op.client("scale-node");
    c.ensure().await;
    let (code, b) = c
        .create(json!({
            "name": "nodey", "runtime": "nodejs20", "entrypoint": "index.handler",
            "env_vars": {"GREETING": "hej"}, "memory_mb": 160, "idle_timeout_sec": 2,
        }))
        .await;
    assert_eq!(code, 201, "{b}");
    let (code, b) = c.upload("nodey", node_instance_zip()).await;
    assert!((200..300).contains(&code), "{code} {b}");
    c.wait_phase("nodey", Phase::Ready, READY).await;
    let first = invoke_json(&c, "nodey").await;
    wait_instances(&c, "nodey", 0, Duration::from_secs(15)).await;
    // The warm process for the next start is there before it is needed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cold = invoke_json(&c, "nodey").await;
    assert_ne!(cold["instance"], first["instance"], "a new process");
    for key in ["greeting", "memory_mb", "cwd", "uid", "heap_mb"] {
        assert_eq!(cold[key], first[key], "{key} differs after a cold start");
    }
    assert_eq!(cold["greeting"], "hej");
    let pid = serving_pid(&op, &c, "nodey").expect("a pid file after the cold start");
    let run_log = c.logs("nodey", "run").await;
    assert!(
        run_log.contains(&format!(
            "handled by {}",
            cold["instance"].as_str().unwrap()
        )),
        "run log: {run_log}"
    );
    // It was a warm process (pid is its sandbox's outer process).
    let tree_has_warm = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains("server.js\0--warm")
                && stat.split_whitespace().nth(4) == Some(&pid.to_string())
        });
    assert!(
        tree_has_warm,
        "the cold start did not use a warm process:\n{run_log}"
    );
}
