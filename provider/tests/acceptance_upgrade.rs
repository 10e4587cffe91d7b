//! Acceptance test of `UpgradeResourceState` with the real terraform CLI,
//! provider and operator (gated on `TF_ACC=1`, see `acceptance.rs`): a
//! state whose resources were written before schema versions (version 0,
//! as by hand or by the Go provider sless replaces) lacking `id`,
//! `namespace` and `phase` and carrying an attribute this provider never had
//! plans "No changes" for all four resources, and a refresh writes it back
//! at the current version with the attributes restored. A state from a newer
//! provider is refused with a clear message.

mod common;

use common::*;
use serde_json::{Value, json};

const HELLO_PY: &str = "def handler(event, context):\n    return 'v1'\n";
const JOB_PY: &str = "def handler(event, context):\n    return event['n'] * 2\n";
const APP_PY: &str = r#"import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header('content-length', '3')
        self.end_headers()
        self.wfile.write(b'svc')

    def log_message(self, *args):
        pass


ThreadingHTTPServer(('127.0.0.1', int(os.environ['PORT'])), Handler).serve_forever()
"#;

/// The schema version this provider writes (`state_upgrade::SCHEMA_VERSION`).
const CURRENT: u64 = 1;

fn config() -> String {
    format!(
        r#"{header}
resource "sless_function" "hello" {{
  name       = "acc-up-fn"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
  memory_mb  = 192
  env_vars = {{
    GREETING = "hi"
  }}
}}

resource "sless_trigger" "web" {{
  name     = "acc-up-web"
  function = sless_function.hello.name
  type     = "http"
}}

resource "sless_job" "double" {{
  name       = "acc-up-job"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/job"
  input      = jsonencode({{ n = 21 }})
}}

resource "sless_service" "app" {{
  name       = "acc-up-svc"
  runtime    = "python3.11"
  entrypoint = "app.py"
  source_dir = "${{path.module}}/app"
}}
"#,
        header = tf_header()
    )
}

fn read_state(tf: &Tf) -> Value {
    let raw = std::fs::read_to_string(tf.dir.join("terraform.tfstate")).unwrap();
    serde_json::from_str(&raw).unwrap()
}

/// Rewrites every resource instance of the state file with `edit`.
fn edit_state(tf: &Tf, edit: impl Fn(&mut serde_json::Map<String, Value>)) {
    let mut state = read_state(tf);
    let serial = state["serial"].as_u64().unwrap_or(0);
    state["serial"] = json!(serial + 1);
    for r in state["resources"].as_array_mut().unwrap() {
        for inst in r["instances"].as_array_mut().unwrap() {
            edit(inst.as_object_mut().unwrap());
        }
    }
    std::fs::write(
        tf.dir.join("terraform.tfstate"),
        serde_json::to_vec_pretty(&state).unwrap(),
    )
    .unwrap();
}

/// `(type, schema_version, attributes)` of every instance in the state file.
fn instances(tf: &Tf) -> Vec<(String, u64, Value)> {
    let state = read_state(tf);
    let mut out = Vec::new();
    for r in state["resources"].as_array().unwrap() {
        for inst in r["instances"].as_array().unwrap() {
            out.push((
                r["type"].as_str().unwrap().to_string(),
                inst["schema_version"].as_u64().unwrap(),
                inst["attributes"].clone(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unversioned_state_of_every_resource_upgrades_with_no_changes() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "upgrade@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("fn/main.py"), HELLO_PY.as_bytes());
    write(&tf.dir.join("job/main.py"), JOB_PY.as_bytes());
    write(&tf.dir.join("app/app.py"), APP_PY.as_bytes());
    tf.write_main(&config());
    tf.apply();
    let applied = instances(&tf);
    assert_eq!(applied.len(), 4, "{applied:?}");
    for (ty, version, _) in &applied {
        assert_eq!(*version, CURRENT, "{ty} is written at the current version");
    }

    // 1. Make every instance look unversioned: version 0, no id, namespace
    //    or phase, and a field this provider never had.
    edit_state(&tf, |inst| {
        inst.insert("schema_version".into(), json!(0));
        let attrs = inst["attributes"].as_object_mut().unwrap();
        for gone in ["id", "namespace", "phase"] {
            attrs.remove(gone);
        }
        attrs.insert("s3_key".into(), json!("functions/legacy.zip"));
    });

    // 2. Plan upgrades each one, refreshes it and finds nothing to do.
    let (code, out) = tf.plan_code();
    assert!(!out.contains("TERRAFORM CRASH"), "{out}");
    assert_eq!(code, 0, "the upgraded state must plan no changes:\n{out}");
    assert!(flat(&out).contains("No changes"), "{out}");

    // 3. A refresh-only apply writes the upgraded state back: the current
    //    version, the unknown field gone, the dropped attributes restored.
    tf.ok(&[
        "apply",
        "-refresh-only",
        "-auto-approve",
        "-input=false",
        "-no-color",
    ]);
    let upgraded = instances(&tf);
    assert_eq!(upgraded.len(), 4);
    for (ty, version, attrs) in &upgraded {
        assert_eq!(*version, CURRENT, "{ty}: {attrs}");
        assert!(attrs.get("s3_key").is_none(), "{ty}: {attrs}");
        let name = attrs["name"].as_str().unwrap();
        assert_eq!(attrs["id"], format!("{ns}/{name}"), "{ty}: {attrs}");
        assert_eq!(attrs["namespace"], ns.as_str(), "{ty}: {attrs}");
        assert!(attrs["phase"].is_string(), "{ty}: {attrs}");
        let before = &applied.iter().find(|(t, _, _)| t == ty).unwrap().2;
        assert_eq!(
            attrs, before,
            "{ty}: the upgrade must restore the applied state"
        );
    }
    assert_eq!(tf.plan_code().0, 0);

    // 4. A state from a newer provider is refused, never silently read.
    edit_state(&tf, |inst| {
        inst.insert("schema_version".into(), json!(CURRENT + 1));
    });
    let (code, out) = tf.plan_code();
    let all = flat(&out);
    assert_eq!(code, 1, "{out}");
    assert!(!all.contains("TERRAFORM CRASH"), "{all}");
    assert!(
        all.contains("newer"),
        "the error must say the state is newer: {all}"
    );

    // Back to the real version so the destroy below can run.
    edit_state(&tf, |inst| {
        inst.insert("schema_version".into(), json!(CURRENT));
    });
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
}
