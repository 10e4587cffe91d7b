//! Acceptance tests of `secret_env_vars` with the real terraform CLI,
//! provider and operator (gated on `TF_ACC=1`, see `acceptance.rs`): a
//! function, a job and a service read their secrets; no plan, `terraform
//! show`, GET answer, build or operator log, invocation log or /funcs page
//! carries a value; the values live in 0600 files, not in the database; a
//! new value reaches a new process without a rebuild; a value changed
//! outside Terraform is drift; bad names are refused naming the field.

mod common;

use common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const FN_PY: &str = "import os\n\n\ndef handler(event, context):\n    return {'key': os.environ.get('API_KEY'), 'greeting': os.environ.get('GREETING'), 'pid': os.getpid()}\n";

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
    format!("s3cr3t-{tag}-{}", std::process::id())
}

fn config(fn_key: &str, job_secret: &str, svc_token: &str, extra: &str) -> String {
    format!(
        r#"{header}
variable "api_key" {{
  type      = string
  sensitive = true
  default   = "{fn_key}"
}}

resource "sless_function" "f" {{
  name       = "acc-sec-fn"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
  env_vars = {{
    GREETING = "hi"
  }}
  secret_env_vars = {{
    API_KEY = var.api_key
  }}
}}

resource "sless_job" "j" {{
  name       = "acc-sec-job"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/job"
  env_vars = {{
    OUT = "${{abspath(path.module)}}/job-out.txt"
  }}
  secret_env_vars = {{
    JOB_SECRET = "{job_secret}"
  }}
}}

resource "sless_service" "s" {{
  name       = "acc-sec-svc"
  runtime    = "python3.11"
  entrypoint = "app.py"
  source_dir = "${{path.module}}/app"
  secret_env_vars = {{
    SVC_TOKEN = "{svc_token}"
  }}
}}

output "fn" {{
  value = {{
    code_hash     = sless_function.f.code_hash
    image_ref     = sless_function.f.image_ref
    last_built_at = sless_function.f.last_built_at
    hash          = sless_function.f.secret_env_vars_hash
  }}
}}

output "job_image" {{
  value = sless_job.j.image_ref
}}

output "svc" {{
  value = {{
    url           = sless_service.s.url
    last_built_at = sless_service.s.last_built_at
  }}
}}
{extra}"#,
        header = tf_header()
    )
}

fn one(k: &str, v: &str) -> BTreeMap<String, String> {
    [(k.to_string(), v.to_string())].into()
}

/// Every file under `dir` (recursively) as bytes, with its path.
fn files_under(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_reach_the_processes_and_nothing_else() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "secrets@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("fn/main.py"), FN_PY.as_bytes());
    write(&tf.dir.join("job/main.py"), JOB_PY.as_bytes());
    write(&tf.dir.join("app/app.py"), APP_PY.as_bytes());
    let (k1, j1, s1) = (secret("fn1"), secret("job1"), secret("svc1"));
    let http = reqwest::Client::new();
    let invoke = || async {
        http.post(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::function_invoke(&ns, "acc-sec-fn")
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
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", op.base_url);
        let token = token.clone();
        async move {
            http.get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };

    // 1. Apply: the processes read their secrets; apply's output does not.
    tf.write_main(&config(&k1, &j1, &s1, ""));
    let plan = tf.ok(&["plan", "-input=false", "-no-color"]);
    let applied = tf.apply();
    for text in [&plan, &applied] {
        for v in [&k1, &j1, &s1] {
            assert!(
                !text.contains(v.as_str()),
                "a value in terraform output:\n{text}"
            );
        }
    }
    assert!(
        plan.contains("secret_env_vars") && plan.contains("(sensitive value)"),
        "{plan}"
    );
    let got = invoke().await;
    assert_eq!(got["key"], k1.as_str(), "{got}");
    assert_eq!(got["greeting"], "hi", "{got}");
    let first_pid = got["pid"].clone();
    assert_eq!(
        std::fs::read_to_string(tf.dir.join("job-out.txt")).unwrap(),
        j1
    );
    let out = tf.outputs();
    let svc_url = out["svc"]["value"]["url"].as_str().unwrap().to_string();
    let svc: Value = http
        .get(&svc_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(svc["token"], s1.as_str(), "{svc}");
    assert_eq!(
        out["fn"]["value"]["hash"],
        sless_wire::secret_hash(&one("API_KEY", &k1)).as_str()
    );

    // 2. Nothing else holds a value: GET answers (names and hash only), the
    //    build and run logs, the invocation log, the /funcs page, terraform
    //    show, the operator's log, and the database.
    let f: Value =
        serde_json::from_str(&get(sless_wire::paths::function(&ns, "acc-sec-fn")).await).unwrap();
    assert_eq!(
        f["spec"]["secret_env_vars"],
        json!({"names": ["API_KEY"], "hash": sless_wire::secret_hash(&one("API_KEY", &k1))}),
        "{f}"
    );
    let mut texts = vec![
        f.to_string(),
        get(sless_wire::paths::job(&ns, "acc-sec-job")).await,
        get(sless_wire::paths::service(&ns, "acc-sec-svc")).await,
        get(sless_wire::paths::functions(&ns)).await,
        get(format!(
            "{}?kind=build",
            sless_wire::paths::function_logs(&ns, "acc-sec-fn")
        ))
        .await,
        get(format!(
            "{}?kind=run",
            sless_wire::paths::function_logs(&ns, "acc-sec-fn")
        ))
        .await,
        get(format!(
            "{}?kind=build",
            sless_wire::paths::job_logs(&ns, "acc-sec-job")
        ))
        .await,
        get(format!(
            "{}?kind=build",
            sless_wire::paths::service_logs(&ns, "acc-sec-svc")
        ))
        .await,
        get(sless_wire::paths::invocations(&ns)).await,
        get(sless_wire::paths::funcs_page(&ns)).await,
        tf.ok(&["show", "-no-color"]),
        op.log(),
    ];
    for v in [&k1, &j1, &s1] {
        for t in &texts {
            assert!(!t.contains(v.as_str()), "{v} leaked into:\n{t}");
        }
    }
    texts.clear();
    let data = op.data_dir.join("secrets").join(&ns);
    for (id, v) in [
        ("acc-sec-fn", &k1),
        ("job.acc-sec-job", &j1),
        ("svc.acc-sec-svc", &s1),
    ] {
        let p = data.join(format!("{id}.json"));
        let meta = std::fs::metadata(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{}", p.display());
        assert!(contains(&std::fs::read(&p).unwrap(), v));
    }
    let mut all = Vec::new();
    files_under(&op.data_dir, &mut all);
    for (p, bytes) in &all {
        if p.starts_with(op.data_dir.join("secrets")) {
            continue;
        }
        for v in [&k1, &j1, &s1] {
            assert!(!contains(bytes, v), "{v} is in {}", p.display());
        }
    }
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after apply must be empty:\n{plan}");

    // 3. New values: an in-place update that restarts the function and the
    //    service and reruns the job, all from the same builds.
    let (k2, j2, s2) = (secret("fn2"), secret("job2"), secret("svc2"));
    tf.write_main(&config(&k2, &j2, &s2, ""));
    let out = tf.run(&[
        "plan",
        "-input=false",
        "-no-color",
        "-detailed-exitcode",
        "-out=tfplan",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let plan_text = text(&out);
    for v in [&k1, &j1, &s1, &k2, &j2, &s2] {
        assert!(!plan_text.contains(v.as_str()), "{plan_text}");
    }
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json", "tfplan"])).unwrap();
    for rc in shown["resource_changes"].as_array().unwrap() {
        assert_eq!(rc["change"]["actions"], json!(["update"]), "{rc}");
        let (known, unknown) = changed_attrs(&rc["change"]);
        assert!(
            known.contains(&"secret_env_vars_hash".to_string()),
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
        after["fn"]["value"]["code_hash"],
        before["fn"]["value"]["code_hash"]
    );
    assert_eq!(
        after["fn"]["value"]["image_ref"],
        before["fn"]["value"]["image_ref"]
    );
    assert_eq!(
        after["fn"]["value"]["last_built_at"], before["fn"]["value"]["last_built_at"],
        "no rebuild"
    );
    assert_eq!(
        after["svc"]["value"]["last_built_at"],
        before["svc"]["value"]["last_built_at"]
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
    let svc = eventually(
        Duration::from_secs(30),
        "the service's new token",
        || async {
            let r = http.get(&svc_url).send().await.ok()?;
            let v: Value = r.json().await.ok()?;
            (v["token"] == s2.as_str()).then_some(v)
        },
    )
    .await;
    assert_eq!(svc["token"], s2.as_str());
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "{plan}");

    // 4. A value changed outside Terraform is drift: the plan updates the
    //    function in place and apply puts Terraform's value back.
    let r = http
        .patch(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::function(&ns, "acc-sec-fn")
        ))
        .bearer_auth(&token)
        .json(&json!({"secret_env_vars": {"API_KEY": "changed-by-hand"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The restart is asynchronous: the old process answers until the new
    // one is ready.
    eventually(Duration::from_secs(30), "the hand-set secret", || async {
        (invoke().await["key"] == "changed-by-hand").then_some(())
    })
    .await;
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 2, "{plan}");
    assert!(
        flat(&plan).contains("~ resource \"sless_function\" \"f\""),
        "{plan}"
    );
    assert!(flat(&plan).contains("1 to change"), "{plan}");
    assert!(
        !plan.contains(k2.as_str()) && !plan.contains("changed-by-hand"),
        "{plan}"
    );
    tf.apply();
    assert_eq!(invoke().await["key"], k2.as_str());
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "{plan}");

    // 5. Bad names: the provider refuses at plan time on the attribute, the
    //    operator with a 400 naming the field; neither echoes the value.
    let tf_bad = Tf::new(&root.path().join("bad"), &op.base_url, &token);
    write(&tf_bad.dir.join("fn/main.py"), FN_PY.as_bytes());
    tf_bad.write_main(&format!(
        r#"{header}
resource "sless_function" "twin" {{
  name       = "acc-sec-twin"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
  env_vars = {{
    API_KEY = "plain"
  }}
  secret_env_vars = {{
    API_KEY = "{k1}"
  }}
}}
"#,
        header = tf_header()
    ));
    let out = tf_bad.run(&["plan", "-input=false", "-no-color"]);
    let all = flat(&text(&out));
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("Invalid secret_env_vars"), "{all}");
    assert!(all.contains("API_KEY is also set in env_vars"), "{all}");
    assert!(!all.contains(k1.as_str()), "{all}");
    let r = http
        .post(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::functions(&ns)
        ))
        .bearer_auth(&token)
        .json(&json!({
            "name": "acc-sec-bad", "runtime": "python3.11", "entrypoint": "main.handler",
            "secret_env_vars": {"SLESS_X": k1}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["field"], "secret_env_vars.SLESS_X", "{body}");
    assert!(!body.to_string().contains(k1.as_str()));

    // 6. Destroy removes the secrets files with the objects.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let left: Vec<_> = std::fs::read_dir(&data)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "secrets left behind: {left:?}");
}
