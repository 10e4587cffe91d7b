//! Acceptance tests of the write-only `secret_env_vars_wo` with
//! `secret_env_vars_version`, with the real terraform CLI, provider and
//! operator (gated on `TF_ACC=1`, see `acceptance.rs`). On Terraform >= 1.11:
//! a function, a job and a service get their secrets from an ephemeral
//! variable; neither the state file nor a saved plan holds a value or a
//! fingerprint; changing only the values changes nothing; bumping the
//! version sends them (new processes, the job reruns, no rebuild); bad
//! configurations are refused on the attribute. On older Terraform, which
//! would store the values, plan refuses with the version needed.

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const FN_PY: &str = "import os\n\n\ndef handler(event, context):\n    return {'key': os.environ.get('API_KEY'), 'pid': os.getpid()}\n";

/// Writes its secret to the file named by `OUT`, returns "done".
const JOB_PY: &str = "import os\n\n\ndef handler(event, context):\n    with open(os.environ['OUT'], 'w') as f:\n        f.write(os.environ['JOB_SECRET'])\n    return 'done'\n";

const APP_PY: &str = r#"import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({'token': os.environ.get('SVC_TOKEN')}).encode()
        self.send_response(200)
        self.send_header('content-length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(('127.0.0.1', int(os.environ['PORT'])), Handler).serve_forever()
"#;

/// A value no other text in the run contains by chance.
fn secret(tag: &str) -> String {
    format!("w0-{tag}-{}", std::process::id())
}

/// The three objects with write-only secrets at `version`, from ephemeral
/// variables (only write-only arguments take those); [`set_secrets`] gives
/// their values through the environment, as a user's pipeline would.
fn config(version: u32) -> String {
    format!(
        r#"{header}
variable "api_key" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

variable "job_secret" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

variable "svc_token" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

resource "sless_function" "f" {{
  name                    = "acc-wo-fn"
  runtime                 = "python3.11"
  entrypoint              = "main.handler"
  source_dir              = "${{path.module}}/fn"
  secret_env_vars_version = {version}
  secret_env_vars_wo = {{
    API_KEY = var.api_key
  }}
}}

resource "sless_job" "j" {{
  name                    = "acc-wo-job"
  runtime                 = "python3.11"
  entrypoint              = "main.handler"
  source_dir              = "${{path.module}}/job"
  secret_env_vars_version = {version}
  env_vars = {{
    OUT = "${{abspath(path.module)}}/job-out.txt"
  }}
  secret_env_vars_wo = {{
    JOB_SECRET = var.job_secret
  }}
}}

resource "sless_service" "s" {{
  name                    = "acc-wo-svc"
  runtime                 = "python3.11"
  entrypoint              = "app.py"
  source_dir              = "${{path.module}}/app"
  secret_env_vars_version = {version}
  secret_env_vars_wo = {{
    SVC_TOKEN = var.svc_token
  }}
}}

output "fn" {{
  value = {{
    last_built_at = sless_function.f.last_built_at
    hash          = sless_function.f.secret_env_vars_hash
  }}
}}

output "job_image" {{
  value = sless_job.j.image_ref
}}

output "svc_url" {{
  value = sless_service.s.url
}}
"#,
        header = tf_header()
    )
}

/// Gives the ephemeral variables their values (`TF_VAR_*`), for every
/// later terraform run.
fn set_secrets(tf: &mut Tf, fn_key: &str, job_secret: &str, svc_token: &str) {
    tf.env.retain(|(k, _)| !k.starts_with("TF_VAR_"));
    for (k, v) in [
        ("TF_VAR_api_key", fn_key),
        ("TF_VAR_job_secret", job_secret),
        ("TF_VAR_svc_token", svc_token),
    ] {
        tf.env.push((k.to_string(), v.to_string()));
    }
}

/// The raw state file.
fn state_file(tf: &Tf) -> String {
    std::fs::read_to_string(tf.dir.join("terraform.tfstate")).unwrap()
}

fn write_sources(tf: &Tf) {
    write(&tf.dir.join("fn/main.py"), FN_PY.as_bytes());
    write(&tf.dir.join("job/main.py"), JOB_PY.as_bytes());
    write(&tf.dir.join("app/app.py"), APP_PY.as_bytes());
}

/// Asserts that none of `values` is in `text` (`what` names the text).
fn assert_absent(values: &[&String], text: &str, what: &str) {
    for v in values {
        assert!(!text.contains(v.as_str()), "{v} is in {what}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_only_secrets_stay_out_of_plans_and_state() {
    if skip() || !terraform_at_least(1, 11, "write-only arguments") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "write-only@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let mut tf = Tf::new(root.path(), &op.base_url, &token);
    write_sources(&tf);
    let http = reqwest::Client::new();
    let invoke = || async {
        http.post(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::function_invoke(&ns, "acc-wo-fn")
        ))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()
    };
    let service_token = |url: String| {
        let http = http.clone();
        async move {
            let r = http.get(&url).send().await.ok()?;
            let v: Value = r.json().await.ok()?;
            v["token"].as_str().map(str::to_string)
        }
    };

    // 1. Create: every process has its secret; the saved plan, the state
    //    and apply's output have none, and no fingerprint either.
    let (k1, j1, s1) = (secret("fn1"), secret("job1"), secret("svc1"));
    set_secrets(&mut tf, &k1, &j1, &s1);
    tf.write_main(&config(1));
    let out = tf.run(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
    assert!(out.status.success(), "{}", text(&out));
    let plan_file = std::fs::read(tf.dir.join("tfplan")).unwrap();
    let shown_plan = tf.ok(&["show", "-json", "tfplan"]);
    let applied = tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    let all = [&k1, &j1, &s1];
    assert_absent(&all, &text(&out), "plan output");
    assert_absent(&all, &String::from_utf8_lossy(&plan_file), "the plan file");
    assert_absent(&all, &shown_plan, "show -json of the plan");
    assert_absent(&all, &applied, "apply output");
    assert_absent(&all, &state_file(&tf), "the state file");
    let got = invoke().await;
    assert_eq!(got["key"], k1.as_str(), "{got}");
    let first_pid = got["pid"].clone();
    assert_eq!(
        std::fs::read_to_string(tf.dir.join("job-out.txt")).unwrap(),
        j1
    );
    let out = tf.outputs();
    assert_eq!(out["fn"]["value"]["hash"], Value::Null, "no fingerprint");
    let svc_url = out["svc_url"]["value"].as_str().unwrap().to_string();
    assert_eq!(service_token(svc_url.clone()).await.as_deref(), Some(&*s1));
    let state: Value = serde_json::from_str(&state_file(&tf)).unwrap();
    for r in state["resources"].as_array().unwrap() {
        let attrs = &r["instances"][0]["attributes"];
        assert_eq!(attrs["secret_env_vars_wo"], Value::Null, "{r}");
        assert_eq!(attrs["secret_env_vars_hash"], Value::Null, "{r}");
        assert_eq!(attrs["secret_env_vars_version"], 1, "{r}");
    }
    // The operator has them: names and its own hash in the GET answer.
    let f: Value = http
        .get(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::function(&ns, "acc-wo-fn")
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(f["spec"]["secret_env_vars"]["names"], json!(["API_KEY"]));
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after apply must be empty:\n{plan}");

    // 2. New values under the same version: nothing to do, nothing sent.
    let (k2, j2, s2) = (secret("fn2"), secret("job2"), secret("svc2"));
    set_secrets(&mut tf, &k2, &j2, &s2);
    tf.write_main(&config(1));
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "only the version sends write-only values:\n{plan}");
    assert_eq!(invoke().await["key"], k1.as_str());

    // 3. A new version: an in-place update of all three, no rebuild; the
    //    function and the service restart with the new values, the job reruns.
    tf.write_main(&config(2));
    let out = tf.run(&[
        "plan",
        "-input=false",
        "-no-color",
        "-detailed-exitcode",
        "-out=tfplan",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        flat(&text(&out)).contains("3 to change, 0 to destroy"),
        "{}",
        text(&out)
    );
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json", "tfplan"])).unwrap();
    for rc in shown["resource_changes"].as_array().unwrap() {
        assert_eq!(rc["change"]["actions"], json!(["update"]), "{rc}");
        let (known, unknown) = changed_attrs(&rc["change"]);
        assert!(
            known.contains(&"secret_env_vars_version".to_string()),
            "{}: {known:?}",
            rc["address"]
        );
        for a in ["code_hash", "image_ref", "last_built_at"] {
            assert!(
                !known.contains(&a.to_string()) && !unknown.contains(&a.to_string()),
                "{}: no rebuild: {known:?} {unknown:?}",
                rc["address"]
            );
        }
    }
    let before = tf.outputs();
    tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    let after = tf.outputs();
    assert_eq!(
        after["fn"]["value"]["last_built_at"], before["fn"]["value"]["last_built_at"],
        "no rebuild"
    );
    assert_eq!(after["job_image"], before["job_image"]);
    let got = invoke().await;
    assert_eq!(got["key"], k2.as_str(), "{got}");
    assert_ne!(got["pid"], first_pid, "a new process");
    assert_eq!(
        std::fs::read_to_string(tf.dir.join("job-out.txt")).unwrap(),
        j2,
        "the job reran with the new secret"
    );
    eventually(
        Duration::from_secs(30),
        "the service's new token",
        || async { (service_token(svc_url.clone()).await.as_deref() == Some(&*s2)).then_some(()) },
    )
    .await;
    assert_absent(&[&k1, &k2, &j2, &s2], &state_file(&tf), "the state file");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "{plan}");

    // 4. Refused on the attribute: both maps, or no version.
    let tf_bad = Tf::new(&root.path().join("bad"), &op.base_url, &token);
    write_sources(&tf_bad);
    for (body, summary, attribute) in [
        (
            "secret_env_vars = { A = \"1\" }\n  secret_env_vars_wo = { B = \"2\" }\n  secret_env_vars_version = 1",
            "Conflicting secrets",
            "secret_env_vars_wo",
        ),
        (
            "secret_env_vars_wo = { B = \"2\" }",
            "Missing secret_env_vars_version",
            "secret_env_vars_version",
        ),
        (
            "secret_env_vars_wo = { SLESS_B = \"2\" }\n  secret_env_vars_version = 1",
            "Invalid secret_env_vars_wo",
            "secret_env_vars_wo",
        ),
    ] {
        tf_bad.write_main(&format!(
            "{header}\nresource \"sless_function\" \"bad\" {{\n  name       = \"acc-wo-bad\"\n  runtime    = \"python3.11\"\n  entrypoint = \"main.handler\"\n  source_dir = \"${{path.module}}/fn\"\n  {body}\n}}\n",
            header = tf_header()
        ));
        let out = tf_bad.run(&["plan", "-input=false", "-no-color"]);
        let all = flat(&text(&out));
        assert!(!out.status.success(), "{all}");
        assert!(all.contains(summary), "{summary}: {all}");
        assert!(
            all.contains("main.tf line") && all.contains(attribute),
            "{all}"
        );
    }

    // 5. Destroy removes the objects and their secrets.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let data = op.data_dir.join("secrets").join(&ns);
    let left: Vec<_> = std::fs::read_dir(&data)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "secrets left behind: {left:?}");
}

/// Terraform before 1.11 ignores the write-only flag and would keep the
/// values in plan and state: the provider refuses at plan time, naming the
/// attribute and the version needed, and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_terraform_is_refused_before_it_stores_a_write_only_value() {
    if skip() {
        return;
    }
    let (major, minor) = terraform_version();
    if (major, minor) >= (1, 11) {
        println!("skipped: this Terraform ({major}.{minor}) supports write-only arguments");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let token = op.token("write-only-old@example.com");
    let mut tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("fn/main.py"), FN_PY.as_bytes());
    let value = secret("old");
    tf.env.push(("TF_VAR_api_key".into(), value.clone()));
    tf.write_main(&format!(
        r#"{header}
variable "api_key" {{
  type      = string
  sensitive = true
}}

resource "sless_function" "f" {{
  name                    = "acc-wo-old"
  runtime                 = "python3.11"
  entrypoint              = "main.handler"
  source_dir              = "${{path.module}}/fn"
  secret_env_vars_version = 1
  secret_env_vars_wo = {{
    API_KEY = var.api_key
  }}
}}
"#,
        header = tf_header()
    ));
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let all = flat(&text(&out));
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("secret_env_vars_wo needs a newer Terraform"),
        "{all}"
    );
    assert!(all.contains("Terraform 1.11 or newer"), "{all}");
    assert!(!all.contains(&value), "{all}");
    let state = std::fs::read_to_string(tf.dir.join("terraform.tfstate")).unwrap_or_default();
    assert!(!state.contains(&value), "{state}");
    assert!(!tf.dir.join("terraform.tfstate").exists() || !state.contains("acc-wo-old"));
}
