//! Acceptance tests of the `sless_function` and `sless_trigger` data sources
//! with the real terraform CLI, provider and operator (gated on `TF_ACC=1`,
//! see `acceptance.rs`): one configuration creates a function and two
//! triggers, a second one reads them by name and gets the values the
//! resources hold; a missing name is an error pointing at `name`.

mod common;

use common::*;
use serde_json::Value;

const HELLO_PY: &str = "def handler(event, context):\n    return 'hello from data'\n";

/// The configuration that owns the objects, with the values to compare as
/// outputs.
fn owner() -> String {
    format!(
        r#"{header}
resource "sless_function" "hello" {{
  name        = "acc-ds"
  runtime     = "python3.11"
  entrypoint  = "main.handler"
  source_dir  = "${{path.module}}/src"
  memory_mb   = 192
  timeout_sec = 12
  env_vars = {{
    GREETING = "hi"
  }}
  secret_env_vars = {{
    API_KEY = "ds-secret-value"
  }}
}}

resource "sless_trigger" "web" {{
  name     = "acc-ds-web"
  function = sless_function.hello.name
  type     = "http"
}}

resource "sless_trigger" "tick" {{
  name     = "acc-ds-tick"
  function = sless_function.hello.name
  type     = "cron"
  schedule = "0 0 1 1 *"
  payload  = jsonencode({{ from = "cron" }})
  enabled  = false
}}

output "function" {{
  value = {{
    id            = sless_function.hello.id
    namespace     = sless_function.hello.namespace
    runtime       = sless_function.hello.runtime
    entrypoint    = sless_function.hello.entrypoint
    memory_mb     = sless_function.hello.memory_mb
    timeout_sec   = sless_function.hello.timeout_sec
    phase         = sless_function.hello.phase
    code_hash     = sless_function.hello.code_hash
    image_ref     = sless_function.hello.image_ref
    invoke_url    = sless_function.hello.invoke_url
    last_built_at = sless_function.hello.last_built_at
    env_vars      = sless_function.hello.env_vars
    secrets_hash  = sless_function.hello.secret_env_vars_hash
  }}
}}

output "web" {{
  value = {{
    id       = sless_trigger.web.id
    function = sless_trigger.web.function
    type     = sless_trigger.web.type
    url      = sless_trigger.web.url
    phase    = sless_trigger.web.phase
    enabled  = sless_trigger.web.enabled
  }}
}}

output "tick" {{
  value = {{
    id       = sless_trigger.tick.id
    function = sless_trigger.tick.function
    type     = sless_trigger.tick.type
    schedule = sless_trigger.tick.schedule
    payload  = sless_trigger.tick.payload
    phase    = sless_trigger.tick.phase
    enabled  = sless_trigger.tick.enabled
  }}
}}
"#,
        header = tf_header()
    )
}

/// The configuration that only reads them.
fn reader(extra: &str) -> String {
    format!(
        r#"{header}
data "sless_function" "hello" {{
  name = "acc-ds"
}}

data "sless_trigger" "web" {{
  name = "acc-ds-web"
}}

data "sless_trigger" "tick" {{
  name = "acc-ds-tick"
}}

output "function" {{
  value = {{
    id            = data.sless_function.hello.id
    namespace     = data.sless_function.hello.namespace
    runtime       = data.sless_function.hello.runtime
    entrypoint    = data.sless_function.hello.entrypoint
    memory_mb     = data.sless_function.hello.memory_mb
    timeout_sec   = data.sless_function.hello.timeout_sec
    phase         = data.sless_function.hello.phase
    code_hash     = data.sless_function.hello.code_hash
    image_ref     = data.sless_function.hello.image_ref
    invoke_url    = data.sless_function.hello.invoke_url
    last_built_at = data.sless_function.hello.last_built_at
    env_vars      = data.sless_function.hello.env_vars
    secrets_hash  = data.sless_function.hello.secret_env_vars_hash
  }}
}}

output "web" {{
  value = {{
    id       = data.sless_trigger.web.id
    function = data.sless_trigger.web.function
    type     = data.sless_trigger.web.type
    url      = data.sless_trigger.web.url
    phase    = data.sless_trigger.web.phase
    enabled  = data.sless_trigger.web.enabled
  }}
}}

output "tick" {{
  value = {{
    id       = data.sless_trigger.tick.id
    function = data.sless_trigger.tick.function
    type     = data.sless_trigger.tick.type
    schedule = data.sless_trigger.tick.schedule
    payload  = data.sless_trigger.tick.payload
    phase    = data.sless_trigger.tick.phase
    enabled  = data.sless_trigger.tick.enabled
  }}
}}

output "secret_names" {{
  value = data.sless_function.hello.secret_env_var_names
}}

output "web_schedule_is_null" {{
  value = data.sless_trigger.web.schedule == null
}}
{extra}"#,
        header = tf_header()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_sources_read_what_another_configuration_created() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "data-sources@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);

    // 1. One configuration creates the function and the triggers.
    let own = Tf::new(&root.path().join("owner"), &op.base_url, &token);
    write(&own.dir.join("src/main.py"), HELLO_PY.as_bytes());
    own.write_main(&owner());
    own.apply();
    let want = own.outputs();

    // 2. Another one reads them by name: the same values.
    let read = Tf::new(&root.path().join("reader"), &op.base_url, &token);
    read.write_main(&reader(""));
    read.apply();
    let got = read.outputs();
    for name in ["function", "web", "tick"] {
        assert_eq!(
            got[name]["value"], want[name]["value"],
            "data source {name} differs from the resource"
        );
    }
    assert_eq!(got["function"]["value"]["namespace"], ns.as_str());
    assert_eq!(got["function"]["value"]["phase"], "Ready");
    assert_eq!(got["function"]["value"]["memory_mb"], 192);
    assert_eq!(got["function"]["value"]["env_vars"]["GREETING"], "hi");
    let hash = got["function"]["value"]["secrets_hash"].as_str().unwrap();
    assert_eq!(hash.len(), 64, "a sha256 hex: {hash}");
    assert_eq!(got["secret_names"]["value"], serde_json::json!(["API_KEY"]));
    // The reader learns names and hash, never the value.
    let state = std::fs::read_to_string(read.dir.join("terraform.tfstate")).unwrap();
    assert!(state.contains("API_KEY") && !state.contains("ds-secret-value"));
    assert_eq!(got["tick"]["value"]["phase"], "Disabled");
    assert_eq!(got["tick"]["value"]["payload"], r#"{"from":"cron"}"#);
    assert_eq!(got["web_schedule_is_null"]["value"], true);
    let url = got["web"]["value"]["url"].as_str().unwrap_or_default();
    assert_eq!(
        url,
        format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::trigger_public(&ns, "acc-ds-web")
        )
    );
    // The URL the data source gives answers (it is the real trigger).
    let r = reqwest::get(url).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), "hello from data");
    // Reading again changes nothing.
    let (code, plan) = read.plan_code();
    assert_eq!(code, 0, "{plan}");

    // 3. A name that does not exist: an error pointing at `name`.
    for (kind, addr) in [("function", "missing_fn"), ("trigger", "missing_tr")] {
        read.write_main(&reader(&format!(
            "\ndata \"sless_{kind}\" \"{addr}\" {{\n  name = \"acc-nope\"\n}}\n"
        )));
        let out = read.run(&["plan", "-input=false", "-no-color"]);
        let all = flat(&text(&out));
        assert!(!out.status.success(), "{all}");
        assert!(!all.contains("TERRAFORM CRASH"), "{all}");
        let cap = if kind == "function" {
            "Function"
        } else {
            "Trigger"
        };
        assert!(all.contains(&format!("{cap} acc-nope not found")), "{all}");
        assert!(all.contains(&format!("in namespace {ns}")), "{all}");
        assert!(
            all.contains(&format!("data \"sless_{kind}\" \"{addr}\"")),
            "{all}"
        );
        assert!(all.contains(r#"name = "acc-nope""#), "{all}");
    }

    // 4. Once the owner destroys them, the reader's plan fails by name.
    own.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    read.write_main(&reader(""));
    let out = read.run(&["plan", "-input=false", "-no-color"]);
    let all = flat(&text(&out));
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("Function acc-ds not found"), "{all}");
}
