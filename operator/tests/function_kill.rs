//! Fault test (issue 15): SIGKILL a function's runtime process while several
//! clients invoke it without pause, through the real operator (default strict
//! isolation when run as root), a real Python process and real HTTP. The
//! function is back (200s from a new process) within a bounded time, every
//! answer in between is 200, 502 or 504 (requests in flight at the kill),
//! and no request hangs (each has a client timeout that fails the test);
//! requests that arrive while it restarts are held for the new process,
//! never refused with a 503. Once with `min_instances = 1`, once with
//! `min_instances = 0` (the default: restart after a crash while up).

mod support;

use serde_json::json;
use sless_wire::Phase;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::{Client, Operator, runtime_pid, zip_of};

/// Concurrent invoking clients.
const CLIENTS: usize = 6;
/// A single request longer than this is a hang and fails the test.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// From the kill to the first 200 of the new process.
const BACK_WITHIN: Duration = Duration::from_secs(20);

/// The function answers with an id drawn when its process started.
fn boot_id_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        "import uuid\n\nBOOT = uuid.uuid4().hex\n\ndef handler(event, context):\n    return {'boot': BOOT}\n",
    )])
}

/// One answer seen by a load client.
#[derive(Debug, Clone)]
struct Answer {
    at: Instant,
    status: u16,
    boot: Option<String>,
}

/// Invokes `name` without pause until `stop`, recording every answer; a
/// transport error or a request over [`REQUEST_TIMEOUT`] ends it with an error.
async fn load_client(
    c: Arc<Client>,
    name: String,
    stop: Arc<AtomicBool>,
) -> Result<Vec<Answer>, String> {
    let mut seen = Vec::new();
    let path = sless_wire::paths::function_invoke(&c.namespace, &name);
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let r = c
            .req(reqwest::Method::POST, &path)
            .json(&json!({}))
            .send()
            .await;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                return Err(format!(
                    "request failed after {:?} (timeout {REQUEST_TIMEOUT:?}): {e}; answers before: {}",
                    sent.elapsed(),
                    seen.len()
                ));
            }
        };
        let status = r.status().as_u16();
        let body = r
            .text()
            .await
            .map_err(|e| format!("reading an answer body: {e}"))?;
        let boot = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["boot"].as_str().map(str::to_string));
        seen.push(Answer {
            at: Instant::now(),
            status,
            boot,
        });
    }
    Ok(seen)
}

/// Counts per status.
fn counts(answers: &[Answer]) -> BTreeMap<u16, usize> {
    let mut m = BTreeMap::new();
    for a in answers {
        *m.entry(a.status).or_insert(0) += 1;
    }
    m
}

/// Runs the scenario against a Ready function `name`: load, kill -9, recovery.
async fn kill_under_load(op: &Operator, c: &Arc<Client>, name: &str) {
    let (_, before) = c.get(name).await;
    let restarts_before = before["status"]["restarts"].as_u64().unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| tokio::spawn(load_client(c.clone(), name.to_string(), stop.clone())))
        .collect();

    // Warm-up under load, then the kill.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = runtime_pid(&c.namespace, name)
        .unwrap_or_else(|| panic!("no runtime process for {name}; log:\n{}", op.log()));
    let killed_at = Instant::now();
    let rc = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 {pid}");

    // Load goes on until the function has answered from a new process for 3 s.
    let deadline = killed_at + BACK_WITHIN + Duration::from_secs(5);
    let new_pid = loop {
        if let Some(p) = runtime_pid(&c.namespace, name).filter(|p| *p != pid) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: no new runtime process {:?} after the kill; status {}",
            killed_at.elapsed(),
            c.get(name).await.1
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for h in clients {
        match h.await.expect("load client task") {
            Ok(a) => all.extend(a),
            Err(e) => panic!("{name}: {e}"),
        }
    }
    all.sort_by_key(|a| a.at);

    let before_kill: Vec<_> = all.iter().filter(|a| a.at < killed_at).collect();
    let old_boot = before_kill
        .iter()
        .rev()
        .find_map(|a| a.boot.clone())
        .expect("a 200 with a boot id before the kill");
    assert!(
        before_kill.iter().all(|a| a.status == 200),
        "{name}: non-200 before the kill: {:?}",
        counts(
            &all.iter()
                .filter(|a| a.at < killed_at)
                .cloned()
                .collect::<Vec<_>>()
        )
    );
    let first_new = all
        .iter()
        .find(|a| a.status == 200 && a.boot.as_deref().is_some_and(|b| b != old_boot))
        .unwrap_or_else(|| {
            panic!(
                "{name}: no 200 from a new process after the kill; answers {:?}",
                counts(&all)
            )
        });
    let back_after = first_new.at.duration_since(killed_at);
    assert!(
        back_after < BACK_WITHIN,
        "{name}: back only after {back_after:?}"
    );
    let between: Vec<_> = all
        .iter()
        .filter(|a| a.at >= killed_at && a.at < first_new.at)
        .cloned()
        .collect();
    let odd: Vec<_> = between
        .iter()
        .filter(|a| ![200, 502, 503, 504].contains(&a.status))
        .collect();
    assert!(
        odd.is_empty(),
        "{name}: unexpected answers while down: {odd:?}"
    );
    // Requests that arrive while the process restarts are held for the new
    // one (up to 10 s), not refused: only those in flight at the kill fail.
    let refused = between.iter().filter(|a| a.status == 503).count();
    assert_eq!(
        refused,
        0,
        "{name}: requests refused with 503 while the process restarted: {:?}",
        counts(&between)
    );
    // Once back, only the new process answers, and only with 200s (a 200
    // from the old one can still arrive just after the kill, not later).
    let after: Vec<_> = all
        .iter()
        .filter(|a| a.at > first_new.at)
        .cloned()
        .collect();
    assert!(
        after
            .iter()
            .all(|a| a.status == 200 && a.boot.as_deref() != Some(old_boot.as_str())),
        "{name}: after recovery: {:?}",
        counts(&after)
    );
    assert!(
        after.len() > 10,
        "{name}: too few answers after recovery: {}",
        after.len()
    );
    // One restart was counted, and one process serves.
    let (_, f) = c.get(name).await;
    assert_eq!(f["status"]["phase"], "Ready", "{f}");
    assert_eq!(
        f["status"]["restarts"].as_u64().unwrap_or(0),
        restarts_before + 1,
        "{name}: restarts {f}"
    );
    let pids = support::runtime_pids(&c.namespace, name);
    assert_eq!(pids, vec![new_pid], "{name}: one runtime process serves");
    println!(
        "function_kill {name}: {} requests from {CLIENTS} clients, 1 SIGKILL; before the kill {:?}; \
         kill to first 200 from the new process {back_after:?}, meanwhile {:?}; after {:?}",
        all.len(),
        counts(&before_kill.into_iter().cloned().collect::<Vec<_>>()),
        counts(&between),
        counts(&after)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_function_process_under_load() {
    let op = Operator::start();
    let base = op.client("kill-load");
    base.ensure().await;
    let c = Arc::new(Client {
        http: reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("client"),
        ..base
    });
    for (name, min) in [("always", 1), ("scaling", 0)] {
        let (code, body) = c
            .create(json!({
                "name": name, "runtime": "python3.11", "entrypoint": "main.handler",
                "min_instances": min, "idle_timeout_sec": 600,
            }))
            .await;
        assert_eq!(code, 201, "create {name}: {body}");
        let (code, body) = c.upload(name, boot_id_zip()).await;
        assert_eq!(code, 202, "upload {name}: {body}");
    }
    for name in ["always", "scaling"] {
        c.wait_phase(name, Phase::Ready, Duration::from_secs(90))
            .await;
    }
    kill_under_load(&op, &c, "always").await;
    kill_under_load(&op, &c, "scaling").await;
}
