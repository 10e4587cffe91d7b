//! Acceptance tests of `terraform import` for the four resources with the
//! real terraform CLI, provider and operator (gated on `TF_ACC=1`, see
//! `acceptance.rs`): objects the state forgot are adopted by
//! `<namespace>/<name>` or by bare name; the first plan only records
//! `source_dir` (the operator's recorded code hash equals the folder's, so
//! nothing rebuilds or reruns) and the plan after it is empty; changed code
//! plans an in-place update; a missing object and another user's namespace
//! are refused with a clear error; `import {}` blocks work too.

mod common;

use common::*;
use serde_json::{Value, json};

const HELLO_PY: &str = "def handler(event, context):\n    return 'v1'\n";

/// Appends a line to the file named by `OUT` per run.
const JOB_PY: &str = "import os\n\n\ndef handler(event, context):\n    with open(os.environ['OUT'], 'a') as f:\n        f.write('run\\n')\n    return event['n'] * 2\n";

const ADDRS: [&str; 5] = [
    "sless_function.hello",
    "sless_trigger.web",
    "sless_trigger.tick",
    "sless_job.double",
    "sless_service.app",
];

fn config(extra: &str) -> String {
    format!(
        r#"{header}
resource "sless_function" "hello" {{
  name       = "acc-im-fn"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
  env_vars = {{
    GREETING = "hi"
  }}
}}

resource "sless_trigger" "web" {{
  name     = "acc-im-web"
  function = sless_function.hello.name
  type     = "http"
}}

resource "sless_trigger" "tick" {{
  name     = "acc-im-tick"
  function = sless_function.hello.name
  type     = "cron"
  schedule = "0 0 1 1 *"
  payload  = jsonencode({{ from = "cron" }})
}}

resource "sless_job" "double" {{
  name       = "acc-im-job"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/job"
  input      = jsonencode({{ n = 21 }})
  run_id     = 1
  env_vars = {{
    OUT = "${{abspath(path.module)}}/runs.log"
  }}
}}

resource "sless_service" "app" {{
  name       = "acc-im-svc"
  runtime    = "python3.11"
  entrypoint = "app.py"
  source_dir = "${{path.module}}/app"
}}

output "fn_built" {{
  value = sless_function.hello.last_built_at
}}

output "job_message" {{
  value = sless_job.double.message
}}

output "url" {{
  value = sless_trigger.web.url
}}
{extra}"#,
        header = tf_header()
    )
}

/// The planned change of each resource address, from `terraform show -json`.
fn plan_changes(tf: &Tf) -> (i32, Value) {
    let out = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-input=false",
        "-no-color",
        "-out=tfplan",
    ]);
    let code = out.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 2, "{}", text(&out));
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json", "tfplan"])).unwrap();
    (code, shown)
}

fn change_of(shown: &Value, addr: &str) -> Value {
    shown["resource_changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["address"] == addr)
        .map(|c| c["change"].clone())
        .unwrap_or_else(|| panic!("{addr} not in the plan: {shown}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_then_plan_for_every_resource_with_real_terraform() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "import@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("fn/main.py"), HELLO_PY.as_bytes());
    write(&tf.dir.join("job/main.py"), JOB_PY.as_bytes());
    write(&tf.dir.join("app/app.py"), SERVICE_APP_PY.as_bytes());
    let runs = || {
        std::fs::read_to_string(tf.dir.join("runs.log"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    tf.write_main(&config(""));

    // 1. Create everything, then make the state forget it: the objects stay
    //    on the operator.
    tf.apply();
    let before = tf.outputs();
    assert_eq!(before["job_message"]["value"], "42", "{before}");
    assert_eq!(runs(), 1);
    let mut rm = vec!["state", "rm"];
    rm.extend(ADDRS);
    tf.ok(&rm);
    assert!(tf.ok(&["state", "list"]).trim().is_empty());

    // 2. Ids that cannot be imported: a missing object, another user's
    //    namespace, a malformed id. Clear errors, nothing in state.
    let other = sless_wire::namespace_for_sub("someone-else@example.com");
    let cases = [
        (
            "acc-missing".to_string(),
            "Cannot import function acc-missing: it does not exist".to_string(),
        ),
        (
            format!("{ns}/acc-missing"),
            format!("no function named acc-missing in namespace {ns}"),
        ),
        (
            format!("{other}/acc-im-fn"),
            format!("namespace {other} is not yours"),
        ),
        (
            "Not_A_Name".to_string(),
            "Invalid import id \"Not_A_Name\"".to_string(),
        ),
    ];
    for (id, want) in &cases {
        let out = tf.run(&["import", "-input=false", "-no-color", ADDRS[0], id]);
        let all = flat(&text(&out));
        assert!(!out.status.success(), "import {id} must fail: {all}");
        assert!(!all.contains("TERRAFORM CRASH"), "{all}");
        assert!(
            all.contains(want.as_str()),
            "import {id}: want {want:?} in {all}"
        );
    }
    assert!(tf.ok(&["state", "list"]).trim().is_empty());

    // 3. Import: the function by `<namespace>/<name>`, the others by name.
    let ids = [
        format!("{ns}/acc-im-fn"),
        "acc-im-web".to_string(),
        format!("{ns}/acc-im-tick"),
        "acc-im-job".to_string(),
        "acc-im-svc".to_string(),
    ];
    for (addr, id) in ADDRS.iter().zip(&ids) {
        let out = tf.ok(&["import", "-input=false", "-no-color", addr, id]);
        assert!(flat(&out).contains("Import successful"), "{out}");
    }
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json"])).unwrap();
    let resources = shown["values"]["root_module"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(resources.len(), ADDRS.len(), "{shown}");
    let fn_state = resources.iter().find(|r| r["address"] == ADDRS[0]).unwrap();
    assert_eq!(fn_state["values"]["id"], format!("{ns}/acc-im-fn"));
    assert_eq!(fn_state["values"]["phase"], "Ready");
    assert_eq!(fn_state["values"]["env_vars"], json!({"GREETING": "hi"}));
    assert!(fn_state["values"]["code_hash"].is_string(), "{fn_state}");
    assert!(fn_state["values"]["source_dir"].is_null(), "{fn_state}");

    // 4. The first plan: the triggers have nothing to change; the resources
    //    with code only record `source_dir` (the recorded code hash equals
    //    the folder's: nothing is unknown, nothing rebuilds or reruns).
    let (code, shown) = plan_changes(&tf);
    assert_eq!(code, 2, "{shown}");
    for addr in ["sless_trigger.web", "sless_trigger.tick"] {
        assert_eq!(
            change_of(&shown, addr)["actions"],
            json!(["no-op"]),
            "{addr}"
        );
    }
    for addr in [
        "sless_function.hello",
        "sless_job.double",
        "sless_service.app",
    ] {
        let ch = change_of(&shown, addr);
        assert_eq!(ch["actions"], json!(["update"]), "{addr}: {ch}");
        let (known, unknown) = changed_attrs(&ch);
        assert_eq!(known, ["source_dir"], "{addr}: {ch}");
        assert!(unknown.is_empty(), "{addr}: nothing rebuilds: {ch}");
    }
    tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    assert_eq!(runs(), 1, "the imported job did not run again");
    let after = tf.outputs();
    assert_eq!(
        after["fn_built"]["value"], before["fn_built"]["value"],
        "the imported function was not rebuilt"
    );
    assert_eq!(after["url"]["value"], before["url"]["value"]);
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "the plan after adopting must be empty:\n{plan}");

    // 5. Code that differs from what the operator recorded: an in-place
    //    code update, not a replacement.
    tf.ok(&["state", "rm", ADDRS[0]]);
    tf.ok(&["import", "-input=false", "-no-color", ADDRS[0], "acc-im-fn"]);
    write(
        &tf.dir.join("fn/main.py"),
        HELLO_PY.replace("v1", "v2").as_bytes(),
    );
    let (code, shown) = plan_changes(&tf);
    assert_eq!(code, 2);
    let ch = change_of(&shown, ADDRS[0]);
    assert_eq!(ch["actions"], json!(["update"]), "{ch}");
    let (known, unknown) = changed_attrs(&ch);
    assert_eq!(known, ["code_hash", "source_dir"], "{ch}");
    assert_eq!(unknown, ["image_ref", "last_built_at", "phase"], "{ch}");
    tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    let r = reqwest::Client::new()
        .post(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::function_invoke(&ns, "acc-im-fn")
        ))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap(), "v2");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "{plan}");

    // 6. `import {}` blocks (Terraform >= 1.5): plan shows the import of the
    //    trigger with no change, apply records it; then
    //    `plan -generate-config-out` writes the configuration of an imported
    //    trigger the configuration does not have, and it plans clean.
    if terraform_at_least(1, 5, "import blocks and plan -generate-config-out") {
        tf.ok(&["state", "rm", "sless_trigger.web"]);
        tf.write_main(&config(&format!(
            "\nimport {{\n  to = sless_trigger.web\n  id = \"{ns}/acc-im-web\"\n}}\n"
        )));
        let (code, shown) = plan_changes(&tf);
        assert!(code == 0 || code == 2, "{shown}");
        let ch = change_of(&shown, "sless_trigger.web");
        assert_eq!(ch["actions"], json!(["no-op"]), "{ch}");
        assert_eq!(ch["importing"]["id"], format!("{ns}/acc-im-web"), "{ch}");
        let out = tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
        assert!(
            flat(&out).contains("1 imported, 0 added, 0 changed, 0 destroyed"),
            "{out}"
        );
        let (code, plan) = tf.plan_code();
        assert_eq!(code, 0, "{plan}");

        // The cron trigger leaves the configuration and the state; an import
        // block alone brings it back with generated configuration.
        tf.ok(&["state", "rm", "sless_trigger.tick"]);
        let tick = config("");
        let (a, b) = (
            tick.find("resource \"sless_trigger\" \"tick\"").unwrap(),
            tick.find("resource \"sless_job\"").unwrap(),
        );
        tf.write_main(&format!(
            "{}{}\nimport {{\n  to = sless_trigger.tick\n  id = \"acc-im-tick\"\n}}\n",
            &tick[..a],
            &tick[b..]
        ));
        let out = tf.run(&[
            "plan",
            "-input=false",
            "-no-color",
            "-generate-config-out=generated.tf",
            "-out=tfplan",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let generated = std::fs::read_to_string(tf.dir.join("generated.tf")).unwrap();
        for want in [
            "resource \"sless_trigger\" \"tick\"",
            "name = \"acc-im-tick\"",
            "function = \"acc-im-fn\"",
            "schedule = \"0 0 1 1 *\"",
            "type = \"cron\"",
            "from = \"cron\"",
        ] {
            assert!(
                flat(&generated).contains(want),
                "want {want:?} in:\n{generated}"
            );
        }
        let out = tf.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
        assert!(
            flat(&out).contains("1 imported, 0 added, 0 changed"),
            "{out}"
        );
        let (code, plan) = tf.plan_code();
        assert_eq!(code, 0, "generated configuration plans clean:\n{plan}");
        std::fs::remove_file(tf.dir.join("generated.tf")).unwrap();
        tf.write_main(&config(""));
        tf.ok(&["state", "rm", "sless_trigger.tick"]);
        tf.ok(&[
            "import",
            "-input=false",
            "-no-color",
            "sless_trigger.tick",
            "acc-im-tick",
        ]);
    }

    // 7. Destroy removes the adopted objects from the operator.
    tf.write_main(&config(""));
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let http = reqwest::Client::new();
    for path in [
        sless_wire::paths::function(&ns, "acc-im-fn"),
        sless_wire::paths::trigger(&ns, "acc-im-web"),
        sless_wire::paths::job(&ns, "acc-im-job"),
        sless_wire::paths::service(&ns, "acc-im-svc"),
    ] {
        let r = http
            .get(format!("{}{path}", op.base_url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path} is gone");
    }
}
