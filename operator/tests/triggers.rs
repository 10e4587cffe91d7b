//! Triggers end to end through the real `sless-operator` binary with the local
//! backend and real Python functions: http triggers (public URL without a
//! token, 404 after delete or when disabled, waiting for a function that does
//! not exist yet), cron triggers (runs observed on the function's side,
//! no overlap with a slow function, skipped ticks, function deleted and
//! recreated, operator restart) and validation.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::{Phase, paths};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Client, Operator, status_json, zip_of};

const READY: Duration = Duration::from_secs(90);

/// Echoes what the function received.
const ECHO: &str = "def handler(event, context):\n    h = event['headers']\n    return {'method': event['method'], 'path': event['path'], 'query': event['query'], 'body': event['body'], 'authorization': h.get('authorization'), 'greeting': 'hi'}\n";

/// Appends "START END TRIGGER BODY" to `$MARK_FILE` after sleeping `$SLEEP` s.
const MARKER: &str = "import json, os, time\n\ndef handler(event, context):\n    start = time.time()\n    time.sleep(float(os.environ.get('SLEEP', '0')))\n    with open(os.environ['MARK_FILE'], 'a') as f:\n        f.write('%f %f %s %s\\n' % (start, time.time(), event['headers'].get('x-sless-trigger'), json.dumps(event['body'])))\n    return {'ok': True}\n";

async fn function(c: &Client, name: &str, code: &str, env: Value) {
    let (status, body) = c
        .create(json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler", "env_vars": env}))
        .await;
    assert_eq!(status, 201, "create function {name}: {body}");
    let (status, body) = c.upload(name, zip_of(&[("main.py", code)])).await;
    assert!(
        (200..300).contains(&status),
        "upload {name}: {status} {body}"
    );
    c.wait_phase(name, Phase::Ready, READY).await;
}

async fn trigger_req(
    c: &Client,
    method: Method,
    name: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let path = match name {
        Some(n) => paths::trigger(&c.namespace, n),
        None => paths::triggers(&c.namespace),
    };
    let mut r = c.req(method, &path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    status_json(r.send().await.expect("trigger request")).await
}

async fn trigger_logs(c: &Client, name: &str) -> String {
    c.req(
        Method::GET,
        &format!("{}/logs", paths::trigger(&c.namespace, name)),
    )
    .send()
    .await
    .expect("trigger logs")
    .text()
    .await
    .unwrap_or_default()
}

/// Polls the trigger until `ok` holds; panics with the last body and log.
async fn wait_trigger(
    c: &Client,
    name: &str,
    timeout: Duration,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let (status, body) = trigger_req(c, Method::GET, Some(name), None).await;
        if status == 200 && ok(&body) {
            return body;
        }
        if Instant::now() > deadline {
            panic!(
                "trigger {name}: not {what} within {timeout:?}; last {status} {body}\nlog:\n{}",
                trigger_logs(c, name).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn phase_is(p: &'static str) -> impl Fn(&Value) -> bool {
    move |b| b["status"]["phase"] == p
}

/// Lines of a marker file: (start, end, trigger header, body JSON).
fn marks(path: &Path) -> Vec<(f64, f64, String, String)> {
    support::read(path)
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(4, ' ');
            Some((
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
                it.next()?.to_string(),
                it.next()?.to_string(),
            ))
        })
        .collect()
}

async fn wait_marks(path: &Path, n: usize, timeout: Duration) -> Vec<(f64, f64, String, String)> {
    let deadline = Instant::now() + timeout;
    loop {
        let m = marks(path);
        if m.len() >= n {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{} runs not seen within {timeout:?}: {m:?}",
            n
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_trigger_serves_the_function_publicly_and_404s_after_delete() {
    let op = Operator::start();
    let c = op.client("trigger-http-user");
    let public = reqwest::Client::new();

    // Validation and conflicts.
    let (s, b) = trigger_req(
        &c,
        Method::POST,
        None,
        Some(json!({"name": "web", "function": "echo", "type": "http", "schedule": "* * * * *"})),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("schedule")),
        "{b}"
    );
    let (s, b) = trigger_req(
        &c,
        Method::POST,
        None,
        Some(json!({"name": "web", "function": "echo", "type": "webhook"})),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("type")),
        "{b}"
    );
    let r = reqwest::Client::new()
        .get(c.url(&paths::triggers(&c.namespace)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // The function does not exist yet: the trigger waits, its URL is known.
    let (s, t) = trigger_req(
        &c,
        Method::POST,
        None,
        Some(json!({"name": "web", "function": "echo", "type": "http"})),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    let url = t["status"]["url"]
        .as_str()
        .expect("url at create")
        .to_string();
    assert_eq!(url, format!("{}/t/{}/web", op.base_url, c.namespace));
    assert_eq!(t["status"]["phase"], "Waiting", "{t}");
    assert!(
        t["status"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not found"),
        "{t}"
    );
    let (s, b) = trigger_req(
        &c,
        Method::POST,
        None,
        Some(json!({"name": "web", "function": "echo", "type": "http"})),
    )
    .await;
    assert_eq!(s, 409, "{b}");
    let r = public.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 404);

    function(&c, "echo", ECHO, json!({})).await;
    wait_trigger(
        &c,
        "web",
        Duration::from_secs(10),
        "Active",
        phase_is("Active"),
    )
    .await;

    // GET with a path and a query, a token that must not reach the function.
    let r = public
        .get(format!("{url}/orders/42?verbose=1&tag=a&tag=b"))
        .bearer_auth("not-for-the-function")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["method"], "GET");
    assert_eq!(v["path"], "/orders/42");
    assert_eq!(v["query"], json!({"verbose": "1", "tag": ["a", "b"]}));
    assert_eq!(v["authorization"], Value::Null);

    // POST with JSON, no token at all.
    let r = public
        .post(&url)
        .json(&json!({"numbers": [1, 2]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["method"].as_str(), v["path"].as_str()),
        (Some("POST"), Some("/"))
    );
    assert_eq!(v["body"], json!({"numbers": [1, 2]}));

    // Disabled → 404 saying so; enabled again → answers.
    let (s, t) = trigger_req(
        &c,
        Method::PATCH,
        Some("web"),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(
        (s, t["status"]["phase"].as_str()),
        (200, Some("Disabled")),
        "{t}"
    );
    let r = public.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let b: Value = r.json().await.unwrap();
    assert!(
        b["error"]["message"].as_str().unwrap().contains("disabled"),
        "{b}"
    );
    trigger_req(
        &c,
        Method::PATCH,
        Some("web"),
        Some(json!({"enabled": true})),
    )
    .await;
    assert_eq!(public.get(&url).send().await.unwrap().status(), 200);

    // The function is deleted: Waiting, 404; recreated: Active, answers again.
    let r = c
        .req(Method::DELETE, &paths::function(&c.namespace, "echo"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let t = wait_trigger(
        &c,
        "web",
        Duration::from_secs(5),
        "Waiting",
        phase_is("Waiting"),
    )
    .await;
    assert!(
        t["status"]["message"]
            .as_str()
            .unwrap()
            .contains("\"echo\" not found"),
        "{t}"
    );
    let r = public.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.json::<Value>().await.is_ok());
    function(&c, "echo", ECHO, json!({})).await;
    wait_trigger(
        &c,
        "web",
        Duration::from_secs(10),
        "Active",
        phase_is("Active"),
    )
    .await;
    assert_eq!(public.get(&url).send().await.unwrap().status(), 200);

    // The list shows it with its URL.
    let (s, l) = trigger_req(&c, Method::GET, None, None).await;
    assert_eq!(s, 200);
    assert_eq!(l["items"][0]["status"]["url"], url.as_str());

    // Deleted: the URL answers 404 JSON, never 502.
    let (s, _) = trigger_req(&c, Method::DELETE, Some("web"), None).await;
    assert_eq!(s, 204);
    for u in [url.clone(), format!("{url}/x?y=1")] {
        let r = public.post(&u).json(&json!({})).send().await.unwrap();
        assert_eq!(r.status(), 404, "{u}");
        let b: Value = r.json().await.expect("JSON 404");
        assert_eq!(b["error"]["code"], "not_found", "{b}");
    }
    let (s, _) = trigger_req(&c, Method::GET, Some("web"), None).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_trigger_runs_on_schedule_and_never_overlaps() {
    let op = Operator::start_unsandboxed();
    let c = op.client("trigger-cron-user");
    let dir = tempfile::tempdir().unwrap();
    let fast_file = dir.path().join("fast.txt");
    let slow_file = dir.path().join("slow.txt");

    // A bad schedule is a 400 naming `schedule`, on create and on update.
    let (s, b) = trigger_req(
        &c,
        Method::POST,
        None,
        Some(
            json!({"name": "tick", "function": "fast", "type": "cron", "schedule": "every minute"}),
        ),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("schedule")),
        "{b}"
    );
    let (s, b) = trigger_req(&c, Method::POST, None, Some(json!({"name": "tick", "function": "fast", "type": "cron", "schedule": "*/1 * * * * *", "payload": "{not json"}))).await;
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("payload")),
        "{b}"
    );

    function(
        &c,
        "fast",
        MARKER,
        json!({"MARK_FILE": fast_file.to_str().unwrap()}),
    )
    .await;
    function(
        &c,
        "slow",
        MARKER,
        json!({"MARK_FILE": slow_file.to_str().unwrap(), "SLEEP": "3"}),
    )
    .await;

    let (s, t) = trigger_req(&c, Method::POST, None, Some(json!({"name": "tick", "function": "fast", "type": "cron", "schedule": "*/1 * * * * *", "payload": "{\"job\": \"nightly\"}"}))).await;
    assert_eq!(s, 201, "{t}");
    assert_eq!(t["status"]["phase"], "Active", "{t}");
    assert!(t["status"]["url"].is_null());
    let (s, b) = trigger_req(
        &c,
        Method::PATCH,
        Some("tick"),
        Some(json!({"schedule": "61 * * * *"})),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("schedule")),
        "{b}"
    );

    let m = wait_marks(&fast_file, 2, Duration::from_secs(15)).await;
    for (_, _, trigger, body) in &m {
        assert_eq!(trigger, "tick");
        assert_eq!(
            serde_json::from_str::<Value>(body).unwrap(),
            json!({"job": "nightly"})
        );
    }
    let t = wait_trigger(&c, "tick", Duration::from_secs(5), "recorded", |b| {
        b["status"]["runs"].as_u64() >= Some(2) && b["status"]["last_run"]["ok"] == true
    })
    .await;
    assert_eq!(t["status"]["last_run"]["status_code"], 200, "{t}");
    assert!(t["status"]["next_run_at"].is_string(), "{t}");

    // The slow function (3 s per run on a 1 s schedule) never runs twice at once.
    let (s, t) = trigger_req(&c, Method::POST, None, Some(json!({"name": "slowpoke", "function": "slow", "type": "cron", "schedule": "*/1 * * * * *"}))).await;
    assert_eq!(s, 201, "{t}");
    let m = wait_marks(&slow_file, 3, Duration::from_secs(30)).await;
    for pair in m.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "runs overlap: one ended at {}, the next started at {}",
            pair[0].1,
            pair[1].0
        );
    }
    let t = wait_trigger(&c, "slowpoke", Duration::from_secs(5), "skipping", |b| {
        b["status"]["skipped"].as_u64() > Some(0)
    })
    .await;
    assert!(t["status"]["skipped"].as_u64().unwrap() >= 2, "{t}");
    let log = trigger_logs(&c, "slowpoke").await;
    assert!(
        log.contains("skipped: previous run still running since"),
        "{log}"
    );

    // A run that raises is recorded as failed, with the function's answer.
    function(
        &c,
        "boom",
        "def handler(event, context):\n    raise ValueError('disk on fire')\n",
        json!({}),
    )
    .await;
    let (s, t) = trigger_req(
        &c,
        Method::POST,
        None,
        Some(json!({"name": "failing", "function": "boom", "type": "cron", "schedule": "*/1 * * * * *"})),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    let t = wait_trigger(&c, "failing", Duration::from_secs(10), "failed once", |b| {
        b["status"]["last_run"]["ok"] == false
    })
    .await;
    assert_eq!(t["status"]["last_run"]["status_code"], 500, "{t}");
    assert!(
        t["status"]["last_run"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("disk on fire"),
        "{t}"
    );
    assert!(trigger_logs(&c, "failing").await.contains("run failed"));
    trigger_req(&c, Method::DELETE, Some("failing"), None).await;

    // A payload update takes effect at once.
    let (s, t) = trigger_req(
        &c,
        Method::PATCH,
        Some("tick"),
        Some(json!({"payload": "{\"job\": \"v2\"}"})),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marks(&fast_file).iter().any(|m| m.3.contains("v2")) {
        assert!(Instant::now() < deadline, "the new payload was never sent");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Disabled: no more runs, next_run_at gone.
    let (s, t) = trigger_req(
        &c,
        Method::PATCH,
        Some("tick"),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(
        (s, t["status"]["phase"].as_str()),
        (200, Some("Disabled")),
        "{t}"
    );
    assert!(t["status"]["next_run_at"].is_null(), "{t}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let n = marks(&fast_file).len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(marks(&fast_file).len(), n, "a disabled trigger ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_trigger_waits_for_its_function_and_survives_restart() {
    let mut op = Operator::start_unsandboxed();
    let c = op.client("trigger-wait-user");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("marks.txt");
    let env = json!({"MARK_FILE": file.to_str().unwrap()});

    // The function does not exist yet: Waiting, and no run is attempted.
    let (s, t) = trigger_req(&c, Method::POST, None, Some(json!({"name": "every2", "function": "worker", "type": "cron", "schedule": "*/2 * * * * *"}))).await;
    assert_eq!(s, 201, "{t}");
    assert_eq!(t["status"]["phase"], "Waiting", "{t}");
    assert!(
        t["status"]["message"]
            .as_str()
            .unwrap()
            .contains("\"worker\" not found"),
        "{t}"
    );
    wait_trigger(
        &c,
        "every2",
        Duration::from_secs(5),
        "logging the wait",
        |_| true,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = trigger_logs(&c, "every2").await;
    assert!(log.contains("retrying at the next tick"), "{log}");

    // Created: Active, runs.
    function(&c, "worker", MARKER, env.clone()).await;
    wait_trigger(
        &c,
        "every2",
        Duration::from_secs(5),
        "Active",
        phase_is("Active"),
    )
    .await;
    wait_marks(&file, 2, Duration::from_secs(15)).await;

    // Deleted: Waiting with a message; recreated: runs again.
    let r = c
        .req(Method::DELETE, &paths::function(&c.namespace, "worker"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let t = wait_trigger(
        &c,
        "every2",
        Duration::from_secs(5),
        "Waiting",
        phase_is("Waiting"),
    )
    .await;
    assert!(
        t["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{t}"
    );
    let n = marks(&file).len();
    function(&c, "worker", MARKER, env.clone()).await;
    wait_trigger(
        &c,
        "every2",
        Duration::from_secs(5),
        "Active",
        phase_is("Active"),
    )
    .await;
    wait_marks(&file, n + 2, Duration::from_secs(15)).await;

    // Operator restart: the schedule resumes from the database.
    op.stop();
    let n = marks(&file).len();
    op.spawn();
    let c = op.client("trigger-wait-user");
    c.wait_phase("worker", Phase::Ready, READY).await;
    wait_marks(&file, n + 2, Duration::from_secs(20)).await;
    let (_, t) = trigger_req(&c, Method::GET, Some("every2"), None).await;
    assert_eq!(t["status"]["phase"], "Active", "{t}");

    // Deleted: no run starts afterwards.
    let (s, _) = trigger_req(&c, Method::DELETE, Some("every2"), None).await;
    assert_eq!(s, 204);
    // A call that reached the function just before the delete may still finish.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n = marks(&file).len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(marks(&file).len(), n, "a deleted trigger ran");
}
