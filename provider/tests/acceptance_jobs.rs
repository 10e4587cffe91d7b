//! Acceptance tests of `sless_job` with the real terraform CLI, provider and
//! operator (gated on `TF_ACC=1`, see `acceptance.rs`): the return value in
//! state, exact plans, reruns on `run_id`, a job message feeding a function's
//! env var (a chain), and failures (an exception, a timeout) failing apply.

mod common;

use common::*;
use serde_json::{Value, json};

/// Sums `numbers` and appends a line to the file named by `OUT` per run.
const SUM_PY: &str = r#"import os


def handler(event, context):
    with open(os.environ['OUT'], 'a') as f:
        f.write('run\n')
    return sum(event['numbers'])
"#;

const RAISE_PY: &str = "def handler(event, context):\n    print('about to fail')\n    raise ValueError('boom: the answer is 42')\n";

const SLEEP_PY: &str =
    "import time\n\n\ndef handler(event, context):\n    time.sleep(30)\n    return 'late'\n";

/// Answers with the `RESULT` env var it was given.
const CHAIN_PY: &str = "import os\n\n\ndef handler(event, context):\n    return {'result': os.environ.get('RESULT')}\n";

fn config(run_id: u32, failing: bool) -> String {
    let mut tf = format!(
        r#"{header}
resource "sless_job" "sum" {{
  name       = "acc-sum"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/sum"
  input      = jsonencode({{ numbers = [100, 200, 300] }})
  run_id     = {run_id}
  env_vars = {{
    OUT = "${{abspath(path.module)}}/runs.log"
  }}
}}

resource "sless_function" "chain" {{
  name       = "acc-chain"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/chain"
  env_vars = {{
    RESULT = sless_job.sum.message
  }}
}}

output "message" {{
  value = sless_job.sum.message
}}

output "chain_url" {{
  value = sless_function.chain.invoke_url
}}

output "image_ref" {{
  value = sless_job.sum.image_ref
}}
"#,
        header = tf_header()
    );
    if failing {
        tf.push_str(
            r#"
resource "sless_job" "raise" {
  name       = "acc-raise"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/raise"
}

resource "sless_job" "sleepy" {
  name        = "acc-sleepy"
  runtime     = "python3.11"
  entrypoint  = "main.handler"
  source_dir  = "${path.module}/sleepy"
  timeout_sec = 2
}
"#,
        );
    }
    tf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_lifecycle_chain_and_failures_with_real_terraform() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "jobs@example.com";
    let token = op.token(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("sum/main.py"), SUM_PY.as_bytes());
    write(&tf.dir.join("raise/main.py"), RAISE_PY.as_bytes());
    write(&tf.dir.join("sleepy/main.py"), SLEEP_PY.as_bytes());
    write(&tf.dir.join("chain/main.py"), CHAIN_PY.as_bytes());
    let runs = || {
        std::fs::read_to_string(tf.dir.join("runs.log"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    tf.write_main(&config(1, false));

    // 1. Apply: the message is the return value for the input; it ran once.
    tf.apply();
    let out = tf.outputs();
    assert_eq!(out["message"]["value"], "600", "{out}");
    assert_eq!(runs(), 1);
    // The build the run used, as the operator reports it.
    let ns = sless_wire::namespace_for_sub(sub);
    let image_ref = out["image_ref"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        image_ref.starts_with(&format!("local/{ns}/acc-sum:")) && image_ref.len() > 30,
        "{out}"
    );

    // 2. Chain: the job's message is the function's env var.
    let chain_url = out["chain_url"]["value"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let r = http
        .post(&chain_url)
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got: Value = r.json().await.unwrap();
    assert_eq!(got["result"], "600", "{got}");

    // 3. Nothing changed: no diff, no rerun.
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan right after apply must be empty:\n{plan}");
    assert_eq!(runs(), 1);

    // 4. Bumping run_id reruns in place; the message stays the same.
    tf.write_main(&config(2, false));
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 2, "{plan}");
    assert!(
        flat(&plan).contains("sless_job.sum will be updated in-place"),
        "{plan}"
    );
    tf.apply();
    assert_eq!(runs(), 2, "the job ran again");
    assert_eq!(tf.outputs()["message"]["value"], "600");
    assert_eq!(
        tf.outputs()["image_ref"]["value"],
        image_ref.as_str(),
        "a rerun of the same code keeps its build"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after the rerun must be empty:\n{plan}");

    // 5. A job that raises and one that sleeps past its timeout fail apply
    //    with the exception text and a timeout message.
    tf.write_main(&config(2, true));
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let all = text(&out);
    eprintln!("expected failure of apply with failing jobs:\n{all}");
    assert!(!out.status.success(), "{all}");
    assert!(!flat(&all).contains("TERRAFORM CRASH"), "{all}");
    assert!(flat(&all).contains("Job acc-raise failed"), "{all}");
    assert!(flat(&all).contains("boom: the answer is 42"), "{all}");
    assert!(flat(&all).contains("Job acc-sleepy failed"), "{all}");
    assert!(
        flat(&all).to_lowercase().contains("timed out")
            || flat(&all).to_lowercase().contains("timeout"),
        "{all}"
    );
    assert_eq!(runs(), 2, "the good job did not rerun");

    // 6. Destroy removes everything, the failed (tainted) jobs too.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let state = tf.ok(&["state", "list"]);
    assert!(state.trim().is_empty(), "{state}");
    for name in ["acc-sum", "acc-raise", "acc-sleepy"] {
        let r = http
            .get(format!(
                "{}{}",
                op.base_url,
                sless_wire::paths::job(&sless_wire::namespace_for_sub(sub), name)
            ))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{name} is gone");
    }
}
