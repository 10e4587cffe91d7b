//! Fault injection with the real binaries and the real terraform (gated on
//! `TF_ACC=1`): the operator is SIGKILLed at several points while
//! `terraform apply` creates 20 objects (functions mid-upload and mid-build,
//! triggers waiting for their URL, jobs mid-run), restarted on the same data
//! dir and port, and applied again. It must converge: every object exactly
//! once, every one answering, no orphan process, no half-written code blob,
//! and a clean plan. docs/reliability.md records the figures of a real run.

mod common;

use common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FUNCTIONS: usize = 12;
const TRIGGERS: usize = 4;
const JOBS: usize = 4;

fn config() -> String {
    format!(
        r#"{header}
variable "round" {{
  type = number
}}

resource "sless_function" "f" {{
  count      = {FUNCTIONS}
  name       = "fault-f${{count.index}}"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
  env_vars   = {{ INDEX = tostring(count.index), ROUND = tostring(var.round) }}
}}

resource "sless_trigger" "t" {{
  count    = {TRIGGERS}
  name     = "fault-t${{count.index}}"
  function = sless_function.f[count.index].name
  type     = "http"
}}

resource "sless_job" "j" {{
  count      = {JOBS}
  name       = "fault-j${{count.index}}"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/job"
  input      = jsonencode({{ n = count.index }})
  run_id     = var.round
}}

output "trigger_urls" {{
  value = sless_trigger.t[*].url
}}

output "job_results" {{
  value = sless_job.j[*].message
}}
"#,
        header = tf_header()
    )
}

/// Every round changes every object (an env var of each function, the
/// `run_id` of each job), so each kill lands in creates, updates or reruns.
fn round_vars(round: usize) -> String {
    format!("round = {round}\n")
}

/// Phases of the namespace's functions and jobs, counted (`Ready: 3, ...`).
async fn phases(http: &reqwest::Client, op: &Operator, token: &str, ns: &str) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for path in [
        sless_wire::paths::functions(ns),
        sless_wire::paths::jobs(ns),
    ] {
        let url = format!("{}{path}", op.base_url);
        let Ok(r) = http.get(&url).bearer_auth(token).send().await else {
            continue;
        };
        let body: Value = r.json().await.unwrap_or(Value::Null);
        for i in body
            .as_array()
            .or_else(|| body["items"].as_array())
            .cloned()
            .unwrap_or_default()
        {
            let kind = if path.ends_with("/jobs") { "job" } else { "fn" };
            let phase = i["status"]["phase"].as_str().unwrap_or("?");
            *counts.entry(format!("{kind} {phase}")).or_default() += 1;
        }
    }
    format!("{counts:?}")
}

/// Every `*.zip` in the code store holds exactly the bytes its name hashes,
/// and no temporary file of an interrupted write is left.
fn assert_code_store_whole(data_dir: &Path) {
    let dir = data_dir.join("code");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".tmp"),
            "a half-written code blob is left in {}: {name}",
            dir.display()
        );
        if let Some(sha) = name.strip_suffix(".zip") {
            let bytes = std::fs::read(e.path()).unwrap();
            let got = hex::encode(Sha256::digest(&bytes));
            assert_eq!(got, sha, "code blob {name} does not hold what it names");
        }
    }
}

/// Processes running code of namespace `ns`.
fn namespace_pids(ns: &str) -> Vec<u32> {
    pids_with_env(&[&format!("SLESS_NAMESPACE={ns}")])
}

fn wait_no_pids(ns: &str, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = namespace_pids(ns);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{why}: processes of {ns} still alive: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_operator_during_apply_converges() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("operator");
    let mut op = Operator::start(&data);
    let listen = op.addr();
    let sub = "faults@example.com";
    let ns = sless_wire::namespace_for_sub(sub);
    let token = op.token(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(
        &tf.dir.join("fn/main.py"),
        b"import os\n\ndef handler(event, context):\n    return {\"index\": os.environ[\"INDEX\"]}\n",
    );
    write(
        &tf.dir.join("job/main.py"),
        b"import time\n\ndef handler(event, context):\n    time.sleep(1.5)\n    return {\"double\": event[\"n\"] * 2}\n",
    );
    tf.write_main(&config());
    let http = reqwest::Client::new();

    // Kill points after apply starts: early (creates and uploads in
    // flight), middle (builds, URL waits), late (jobs running).
    let mut report = Vec::new();
    let kills_ms = [1000u64, 1500, 2200, 3000, 4500];
    for (round, delay_ms) in kills_ms.into_iter().enumerate() {
        std::fs::write(tf.dir.join("terraform.tfvars"), round_vars(round)).unwrap();
        let log_path = root.path().join(format!("apply-{round}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut apply = Command::new(terraform_bin())
            .args(["apply", "-auto-approve", "-input=false", "-no-color"])
            .current_dir(&tf.dir)
            .envs(tf.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("terraform apply");
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        let seen = phases(&http, &op, &token, &ns).await;
        op.kill9();
        // Terraform must give up (or finish) on its own, never hang.
        let deadline = Instant::now() + Duration::from_secs(180);
        let status = loop {
            if let Some(s) = apply.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = apply.kill();
                panic!(
                    "terraform apply hung after the operator was killed:\n{}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let out = std::fs::read_to_string(&log_path).unwrap_or_default();
        assert!(!out.contains("TERRAFORM CRASH"), "{out}");
        assert!(!out.contains("panicked"), "{out}");
        // Nothing of the killed operator keeps running.
        wait_no_pids(&ns, "after SIGKILL of the operator");
        report.push(format!(
            "round {round}: killed {delay_ms} ms into apply, objects then {seen}, apply exit {:?}",
            status.code()
        ));
        op = Operator::start_listening(&data, &listen, &[]);
        assert_code_store_whole(&data);
    }
    for line in &report {
        println!("{line}");
    }

    // Applying again converges: every object exactly once, all answering.
    tf.apply();
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after converging must be clean:\n{plan}");
    let expect = |prefix: &str, n: usize| -> Vec<String> {
        let mut v: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
        v.sort();
        v
    };
    assert_eq!(
        object_names(&op, &token, &sless_wire::paths::functions(&ns)).await,
        expect("fault-f", FUNCTIONS)
    );
    assert_eq!(
        object_names(&op, &token, &sless_wire::paths::triggers(&ns)).await,
        expect("fault-t", TRIGGERS)
    );
    assert_eq!(
        object_names(&op, &token, &sless_wire::paths::jobs(&ns)).await,
        expect("fault-j", JOBS)
    );
    let outputs = tf.outputs();
    let urls = outputs["trigger_urls"]["value"].as_array().unwrap().clone();
    assert_eq!(urls.len(), TRIGGERS);
    for (i, url) in urls.iter().enumerate() {
        let url = url.as_str().unwrap();
        let r = http.get(url).send().await.unwrap();
        assert_eq!(r.status(), 200, "{url}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["index"], i.to_string(), "{url}: {body}");
    }
    let results = outputs["job_results"]["value"].as_array().unwrap().clone();
    for (i, message) in results.iter().enumerate() {
        let v: Value = serde_json::from_str(message.as_str().unwrap()).unwrap();
        assert_eq!(v["double"], (i * 2) as u64, "job {i}: {v}");
    }
    assert_code_store_whole(&data);

    // Destroy leaves nothing: no object, no process.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    for path in [
        sless_wire::paths::functions(&ns),
        sless_wire::paths::triggers(&ns),
        sless_wire::paths::jobs(&ns),
    ] {
        assert!(object_names(&op, &token, &path).await.is_empty(), "{path}");
    }
    wait_no_pids(&ns, "after destroy");
}
