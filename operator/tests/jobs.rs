//! Jobs end to end through the real `sless-operator` binary with the local
//! backend: a Python and a Node job return their value as `message`; PATCH
//! with a new `run_id` reruns, the same spec does not; an exception and a
//! timeout fail with a message saying so (and the timed-out process is gone);
//! bad input is a 400 naming the field; a name clash is a 409.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::paths;
use std::time::{Duration, Instant};
use support::{Client, Operator, status_json, zip_of};

const DONE: Duration = Duration::from_secs(90);

/// Creates a job and uploads its code; returns the job after the upload.
async fn start_job(c: &Client, spec: Value, zip: Vec<u8>) -> Value {
    let name = spec["name"].as_str().expect("name").to_string();
    let (code, body) = c
        .call(Method::POST, &paths::jobs(&c.namespace), Some(spec))
        .await;
    assert_eq!(code, 201, "create {name}: {body}");
    assert_eq!(body["generation"], 1);
    assert_eq!(body["status"]["phase"], "Pending");
    let (code, body) = c.put_code(&paths::job_code(&c.namespace, &name), zip).await;
    assert_eq!(code, 202, "upload {name}: {body}");
    assert_eq!(body["generation"], 2, "new code bumps the generation");
    body
}

/// Polls until the job ran `generation` to a terminal phase.
async fn wait_done(c: &Client, name: &str, generation: u64) -> Value {
    let deadline = Instant::now() + DONE;
    loop {
        let (code, body) = c
            .call(Method::GET, &paths::job(&c.namespace, name), None)
            .await;
        assert_eq!(code, 200, "get {name}: {body}");
        let phase = body["status"]["phase"].as_str().unwrap_or("");
        if body["status"]["observed_generation"] == generation
            && matches!(phase, "Succeeded" | "Failed")
        {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "job {name} generation {generation} not done after {DONE:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn sum_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        "def handler(event, context):\n    return sum(event['numbers'])\n",
    )])
}

#[tokio::test]
async fn a_job_returns_its_value_as_message() {
    let op = Operator::start();
    let c = op.client("job-sum-user");
    start_job(
        &c,
        json!({"name": "sum", "runtime": "python3.11", "entrypoint": "main.handler",
               "input": "{\"numbers\":[100,200,300]}"}),
        sum_zip(),
    )
    .await;
    let job = wait_done(&c, "sum", 2).await;
    assert_eq!(job["status"]["phase"], "Succeeded", "{job}");
    assert_eq!(job["status"]["message"], "600");
    assert!(job["status"]["started_at"].is_string(), "{job}");
    assert!(job["status"]["completed_at"].is_string(), "{job}");
    assert!(job["status"]["code_sha256"].is_string(), "{job}");

    // A Node job; its result is re-serialised compactly, keys sorted.
    start_job(
        &c,
        json!({"name": "node-sum", "runtime": "nodejs20", "entrypoint": "index.handler",
               "input": "{\"numbers\": [1, 2, 3]}"}),
        zip_of(&[(
            "index.js",
            "exports.handler = async (event) => ({ total: event.numbers.reduce((a, b) => a + b, 0), items: event.numbers.length });\n",
        )]),
    )
    .await;
    let job = wait_done(&c, "node-sum", 2).await;
    assert_eq!(job["status"]["phase"], "Succeeded", "{job}");
    assert_eq!(job["status"]["message"], "{\"items\":3,\"total\":6}");

    // The same name again is a clash; the list has both, sorted.
    let (code, body) = c
        .call(
            Method::POST,
            &paths::jobs(&c.namespace),
            Some(json!({"name": "sum", "runtime": "python3.11", "entrypoint": "main.handler"})),
        )
        .await;
    assert_eq!(code, 409, "{body}");
    let (code, body) = c.call(Method::GET, &paths::jobs(&c.namespace), None).await;
    assert_eq!(code, 200);
    let names: Vec<_> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["node-sum", "sum"]);

    // The run log has the run's output; delete makes it 404.
    let (code, _) = c
        .call(Method::DELETE, &paths::job(&c.namespace, "sum"), None)
        .await;
    assert_eq!(code, 204);
    let (code, body) = c
        .call(Method::GET, &paths::job(&c.namespace, "sum"), None)
        .await;
    assert_eq!(code, 404, "{body}");
}

#[tokio::test]
async fn run_id_reruns_and_the_same_spec_does_not() {
    let op = Operator::start_unsandboxed();
    let c = op.client("job-rerun-user");
    let side = op.data_dir.join("side-effect.txt");
    let zip = zip_of(&[(
        "main.py",
        "import os\n\ndef handler(event, context):\n    with open(os.environ['SIDE_FILE'], 'a') as f:\n        f.write('ran\\n')\n    with open(os.environ['SIDE_FILE']) as f:\n        return {'runs': len(f.readlines()), 'input': event}\n",
    )]);
    let env = json!({"SIDE_FILE": side.to_string_lossy()});
    start_job(
        &c,
        json!({"name": "counter", "runtime": "python3.11", "entrypoint": "main.handler",
               "env_vars": env, "input": "{\"a\": 1}", "run_id": 0}),
        zip.clone(),
    )
    .await;
    let job = wait_done(&c, "counter", 2).await;
    assert_eq!(job["status"]["message"], "{\"input\":{\"a\":1},\"runs\":1}");
    let built_log = |s: String| s.matches("=== build of").count();
    let path = paths::job(&c.namespace, "counter");

    // Same code again: nothing happens.
    let (code, body) = c
        .put_code(&paths::job_code(&c.namespace, "counter"), zip)
        .await;
    assert_eq!(code, 202);
    assert_eq!(body["generation"], 2, "the same code does not bump: {body}");

    // run_id bump: generation 3, runs again, no rebuild.
    let (code, body) = c
        .call(Method::PATCH, &path, Some(json!({"run_id": 1})))
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["generation"], 3);
    let job = wait_done(&c, "counter", 3).await;
    assert_eq!(job["status"]["phase"], "Succeeded", "{job}");
    assert_eq!(job["status"]["message"], "{\"input\":{\"a\":1},\"runs\":2}");
    assert_eq!(std::fs::read_to_string(&side).unwrap(), "ran\nran\n");
    let logs = c
        .req(Method::GET, &paths::job_logs(&c.namespace, "counter"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        built_log(logs.clone()),
        1,
        "built once per code version: {logs}"
    );

    // The same values again: no new generation, no run.
    let (code, body) = c
        .call(
            Method::PATCH,
            &path,
            Some(json!({"run_id": 1, "input": "{\"a\": 1}"})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["generation"], 3,
        "an unchanged spec does not bump: {body}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(std::fs::read_to_string(&side).unwrap(), "ran\nran\n");

    // New input reruns with it.
    let (_, body) = c
        .call(Method::PATCH, &path, Some(json!({"input": "[1, 2]"})))
        .await;
    assert_eq!(body["generation"], 4);
    let job = wait_done(&c, "counter", 4).await;
    assert_eq!(job["status"]["message"], "{\"input\":[1,2],\"runs\":3}");
}

#[tokio::test]
async fn an_exception_fails_the_job_with_its_text_and_output() {
    let op = Operator::start();
    let c = op.client("job-raise-user");
    start_job(
        &c,
        json!({"name": "raiser", "runtime": "python3.11", "entrypoint": "main.handler"}),
        zip_of(&[(
            "main.py",
            "def handler(event, context):\n    print('about to check the numbers', flush=True)\n    raise ValueError('numbers must not be empty')\n",
        )]),
    )
    .await;
    let job = wait_done(&c, "raiser", 2).await;
    assert_eq!(job["status"]["phase"], "Failed", "{job}");
    let error = job["status"]["error"].as_str().unwrap_or("");
    assert!(error.contains("ValueError"), "{error}");
    assert!(error.contains("numbers must not be empty"), "{error}");
    assert!(
        error.contains("about to check the numbers"),
        "the output tail: {error}"
    );
    assert!(job["status"].get("message").is_none(), "{job}");

    // A wrong entrypoint fails visibly too.
    let (_, body) = c
        .call(
            Method::PATCH,
            &paths::job(&c.namespace, "raiser"),
            Some(json!({"entrypoint": "main.nothere"})),
        )
        .await;
    assert_eq!(body["generation"], 3);
    let job = wait_done(&c, "raiser", 3).await;
    assert_eq!(job["status"]["phase"], "Failed", "{job}");
    assert!(
        job["status"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("nothere"),
        "{job}"
    );
}

fn alive(pid: u32) -> bool {
    // A zombie does not count: the operator reaps its children.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn a_job_past_its_timeout_is_killed_and_fails_saying_so() {
    let op = Operator::start_unsandboxed();
    let c = op.client("job-timeout-user");
    let pid_path = op.data_dir.join("sleeper.pid");
    let started = Instant::now();
    start_job(
        &c,
        json!({"name": "sleeper", "runtime": "python3.11", "entrypoint": "main.handler",
               "timeout_sec": 2, "env_vars": {"PID_FILE": pid_path.to_string_lossy()}}),
        zip_of(&[(
            "main.py",
            "import os, time\n\ndef handler(event, context):\n    with open(os.environ['PID_FILE'], 'w') as f:\n        f.write(str(os.getpid()))\n    time.sleep(120)\n    return 'woke up'\n",
        )]),
    )
    .await;
    let job = wait_done(&c, "sleeper", 2).await;
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(job["status"]["phase"], "Failed", "{job}");
    let error = job["status"]["error"].as_str().unwrap_or("");
    assert!(error.contains("timed out after 2 s"), "{error}");
    let pid: u32 = std::fs::read_to_string(&pid_path)
        .expect("the job wrote its pid")
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(Instant::now() < deadline, "job process {pid} still alive");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn bad_job_input_is_a_400_naming_the_field() {
    let op = Operator::start();
    let c = op.client("job-bad-user");
    let jobs = paths::jobs(&c.namespace);
    let cases = [
        (
            json!({"name": "j", "runtime": "python3.11", "entrypoint": "main.handler", "input": "{not json"}),
            "input",
        ),
        (
            json!({"name": "j", "runtime": "ruby3.0", "entrypoint": "main.handler"}),
            "runtime",
        ),
        (
            json!({"name": "j", "runtime": "python3.11", "entrypoint": "main.handler", "timeout_sec": 0}),
            "timeout_sec",
        ),
        (
            json!({"name": "Bad_Name", "runtime": "python3.11", "entrypoint": "main.handler"}),
            "name",
        ),
        (json!({"name": "j", "runtime": "python3.11"}), "entrypoint"),
    ];
    for (body, field) in cases {
        let (code, err) = c.call(Method::POST, &jobs, Some(body.clone())).await;
        assert_eq!(code, 400, "{body} -> {err}");
        assert_eq!(err["error"]["field"], field, "{body} -> {err}");
    }
    let (code, body) = c
        .call(
            Method::POST,
            &jobs,
            Some(json!({"name": "j", "runtime": "python3.11", "entrypoint": "main.handler"})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, err) = c
        .call(
            Method::PATCH,
            &paths::job(&c.namespace, "j"),
            Some(json!({"input": "[1,"})),
        )
        .await;
    assert_eq!(code, 400, "{err}");
    assert_eq!(err["error"]["field"], "input");
    // A zip whose sha256 does not match is refused like for functions.
    let r = c
        .req(Method::PUT, &paths::job_code(&c.namespace, "j"))
        .query(&[("sha256", "0".repeat(64))])
        .body(sum_zip())
        .send()
        .await
        .unwrap();
    let (code, err) = status_json(r).await;
    assert_eq!(code, 400, "{err}");
    assert_eq!(err["error"]["field"], "sha256");
    // Another user's token cannot see it.
    let other = op.client("someone-else");
    let r = other
        .req(Method::GET, &paths::job(&c.namespace, "j"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[tokio::test]
async fn a_run_cut_short_by_an_operator_crash_runs_again() {
    let mut op = Operator::start_unsandboxed();
    let c = op.client("job-restart-user");
    let side = op.data_dir.join("starts.txt");
    start_job(
        &c,
        json!({"name": "slow", "runtime": "python3.11", "entrypoint": "main.handler",
               "env_vars": {"SIDE_FILE": side.to_string_lossy()}}),
        zip_of(&[(
            "main.py",
            "import os, time\n\ndef handler(event, context):\n    with open(os.environ['SIDE_FILE'], 'a') as f:\n        f.write('started\\n')\n    time.sleep(3)\n    return 42\n",
        )]),
    )
    .await;
    let deadline = Instant::now() + DONE;
    while !std::fs::read_to_string(&side).is_ok_and(|s| s.contains("started")) {
        assert!(Instant::now() < deadline, "the job never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    op.kill();
    op.spawn();
    let c = op.client("job-restart-user");
    let job = wait_done(&c, "slow", 2).await;
    assert_eq!(job["status"]["phase"], "Succeeded", "{job}");
    assert_eq!(job["status"]["message"], "42");
    assert_eq!(
        std::fs::read_to_string(&side).unwrap(),
        "started\nstarted\n",
        "the interrupted run ran again, once"
    );
}

#[tokio::test]
async fn a_newer_generation_cancels_the_running_one_and_delete_kills_a_run() {
    let op = Operator::start_unsandboxed();
    let c = op.client("job-cancel-user");
    let pids = op.data_dir.join("pids.txt");
    let zip = zip_of(&[(
        "main.py",
        "import os, time\n\ndef handler(event, context):\n    with open(os.environ['PID_FILE'], 'a') as f:\n        f.write(str(os.getpid()) + '\\n')\n    time.sleep(event['sleep'])\n    return event['sleep']\n",
    )]);
    start_job(
        &c,
        json!({"name": "long", "runtime": "python3.11", "entrypoint": "main.handler",
               "timeout_sec": 120, "input": "{\"sleep\": 60}",
               "env_vars": {"PID_FILE": pids.to_string_lossy()}}),
        zip,
    )
    .await;
    let first_pid = wait_pid_lines(&pids, 1).await[0];
    // A new input while generation 2 runs: its process is killed, 3 runs.
    let (code, body) = c
        .call(
            Method::PATCH,
            &paths::job(&c.namespace, "long"),
            Some(json!({"input": "{\"sleep\": 0.2}"})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let job = wait_done(&c, "long", 3).await;
    assert_eq!(job["status"]["phase"], "Succeeded", "{job}");
    assert_eq!(job["status"]["message"], "0.2");
    assert!(
        !alive(first_pid),
        "the cancelled run {first_pid} still runs"
    );

    // Delete while running: the run's process is killed, the job is gone.
    let (_, body) = c
        .call(
            Method::PATCH,
            &paths::job(&c.namespace, "long"),
            Some(json!({"input": "{\"sleep\": 60}"})),
        )
        .await;
    assert_eq!(body["generation"], 4);
    let running = wait_pid_lines(&pids, 3).await[2];
    let (code, _) = c
        .call(Method::DELETE, &paths::job(&c.namespace, "long"), None)
        .await;
    assert_eq!(code, 204);
    assert!(
        !alive(running),
        "the deleted job's run {running} still runs after the delete answered"
    );
    let (code, _) = c
        .call(Method::GET, &paths::job(&c.namespace, "long"), None)
        .await;
    assert_eq!(code, 404);
    let ns_dir = op.data_dir.join("builds").join(&c.namespace);
    assert!(!ns_dir.join("job.long").exists(), "build dir left");
}

/// Waits until `path` has at least `n` pid lines; returns them.
async fn wait_pid_lines(path: &std::path::Path, n: usize) -> Vec<u32> {
    let deadline = Instant::now() + DONE;
    loop {
        let pids: Vec<u32> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        assert!(Instant::now() < deadline, "no run {n} started: {pids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn memory_and_result_size_limits_fail_the_job_saying_so() {
    let op = Operator::start();
    let c = op.client("job-limits-user");
    start_job(
        &c,
        json!({"name": "hog", "runtime": "python3.11", "entrypoint": "main.handler",
               "memory_mb": 64, "timeout_sec": 60}),
        zip_of(&[(
            "main.py",
            "import time\n\ndef handler(event, context):\n    hog = []\n    for _ in range(100):\n        hog.append(bytearray(16 * 1024 * 1024))\n        time.sleep(0.1)\n    return len(hog)\n",
        )]),
    )
    .await;
    let job = wait_done(&c, "hog", 2).await;
    assert_eq!(job["status"]["phase"], "Failed", "{job}");
    let error = job["status"]["error"].as_str().unwrap_or("");
    assert!(error.contains("exceeds memory_mb 64"), "{error}");

    start_job(
        &c,
        json!({"name": "big", "runtime": "python3.11", "entrypoint": "main.handler"}),
        zip_of(&[(
            "main.py",
            "def handler(event, context):\n    return 'x' * 300000\n",
        )]),
    )
    .await;
    let job = wait_done(&c, "big", 2).await;
    assert_eq!(job["status"]["phase"], "Failed", "{job}");
    let error = job["status"]["error"].as_str().unwrap_or("");
    assert!(error.contains("262144 bytes"), "{error}");
}
