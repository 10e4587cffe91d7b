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
use support::{Client, Operator, runtime_pids, zip_of};

const READY: Duration = Duration::from_secs(90);

/// A handler that says which process answered (an id drawn at import), its
/// environment, working directory and memory limit as it sees them.
fn instance_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        r#"import os, uuid

INSTANCE = uuid.uuid4().hex

def handler(event, context):
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_function_scales_to_zero_and_the_first_requests_start_one_process() {
    let op = Operator::start();
    let c = op.client("scale-user");
    c.ensure().await;
    let f = create(&c, "idle", json!({"idle_timeout_sec": 2})).await;
    assert_eq!(f["spec"]["min_instances"], 0, "default min_instances: {f}");
    assert_eq!(f["spec"]["idle_timeout_sec"], 2);
    let first = invoke_json(&c, "idle").await;
    assert_eq!(runtime_pids(&c.namespace, "idle").len(), 1);
    assert!(pid_file(&op, &c, "idle").exists());

    // Two seconds without a request: the process goes, the function stays Ready.
    let at_zero = wait_instances(&c, "idle", 0, Duration::from_secs(15)).await;
    assert_eq!(at_zero["status"]["phase"], "Ready", "{at_zero}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !runtime_pids(&c.namespace, "idle").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the idle process is still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!pid_file(&op, &c, "idle").exists(), "pid file left at zero");
    let run_log = c.logs("idle", "run").await;
    assert!(run_log.contains("scaled to zero"), "run log: {run_log}");

    // Eight requests at once: all held (no 503), all answered by one new process.
    let answers = futures_util::future::join_all((0..8).map(|_| invoke_json(&c, "idle"))).await;
    let instances: std::collections::BTreeSet<_> =
        answers.iter().map(|a| a["instance"].to_string()).collect();
    assert_eq!(instances.len(), 1, "one process answered all: {answers:?}");
    assert_ne!(answers[0]["instance"], first["instance"], "a new process");
    assert_eq!(runtime_pids(&c.namespace, "idle").len(), 1);
    let run_log = c.logs("idle", "run").await;
    assert_eq!(
        run_log.matches("cold start: pid").count(),
        1,
        "exactly one cold start: {run_log}"
    );
    wait_instances(&c, "idle", 1, Duration::from_secs(5)).await;

    // The cold-started process sees what the first one saw.
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

    // Deleting a function at zero leaves nothing running.
    wait_instances(&c, "idle", 0, Duration::from_secs(15)).await;
    let (code, _) = c
        .call(Method::DELETE, &paths::function(&c.namespace, "idle"), None)
        .await;
    assert_eq!(code, 204);
    assert!(runtime_pids(&c.namespace, "idle").is_empty());
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
    let (code, f) = c
        .call(
            Method::PATCH,
            &paths::function(&c.namespace, "always"),
            Some(json!({"min_instances": 0, "idle_timeout_sec": 2})),
        )
        .await;
    assert_eq!(code, 200, "{f}");
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
    let (code, f) = c
        .call(
            Method::PATCH,
            &paths::function(&c.namespace, "always"),
            Some(json!({"min_instances": 1})),
        )
        .await;
    assert_eq!(code, 200, "{f}");
    wait_instances(&c, "always", 1, Duration::from_secs(15)).await;
    assert_eq!(runtime_pids(&c.namespace, "always").len(), 1);

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
    assert!(runtime_pids(&c.namespace, "sleepy").is_empty());

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
