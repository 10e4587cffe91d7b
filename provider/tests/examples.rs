//! Every directory under `examples/` (but `provider/` and `resources/`, the
//! registry docs' snippets) applied with the real terraform against the real
//! operator, answering as its comments promise, planned again with no
//! changes, and destroyed without a trace (gated on `TF_ACC=1`).
//!
//! The examples name real packages (`humanize` from PyPI, `ms` from npm). The
//! test never reaches a registry: `scripts/test.sh` downloads them once into
//! `build/tools/example-deps` (`ensure_example_deps` in scripts/lib/tools.sh)
//! and the operator's builds install from there (`PIP_NO_INDEX`,
//! `PIP_FIND_LINKS`, `npm_config_offline`, `npm_config_cache`, which the
//! operator hands to pip and npm).

mod common;

use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The examples this test knows how to check; a new example directory fails
/// the test until it is added here with its check.
const EXAMPLES: &[&str] = &[
    "cron-trigger",
    "hello-node",
    "hello-python",
    "http-trigger",
    "job-chain",
    "service",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// `build/tools/example-deps`, or a panic saying how to fill it.
fn example_deps() -> PathBuf {
    let dir = repo_root().join("build/tools/example-deps");
    assert!(
        dir.join(".stamp").is_file(),
        "{} is missing: run scripts/test.sh once, or \
         `source scripts/lib/tools.sh && ensure_example_deps`, to download the \
         examples' PyPI and npm packages (the test itself stays offline)",
        dir.display()
    );
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        // A developer's own `terraform init` leaves these behind.
        if name == ".terraform" || name.to_string_lossy().starts_with("terraform.tfstate") {
            continue;
        }
        let target = to.join(&name);
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn output(tf: &Tf, name: &str) -> Value {
    let outputs = tf.outputs();
    let v = outputs[name]["value"].clone();
    assert!(!v.is_null(), "output {name} is missing: {outputs}");
    v
}

fn output_str(tf: &Tf, name: &str) -> String {
    output(tf, name)
        .as_str()
        .unwrap_or_else(|| panic!("output {name} is not a string"))
        .to_string()
}

/// POSTs `body` to a function's invoke URL with the token; its JSON answer.
async fn invoke(http: &reqwest::Client, url: &str, token: &str, body: Value) -> Value {
    let r = http
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "POST {url}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {url}: {e}: {text}"))
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let r = http
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "GET {url}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
}

/// What the example's comments promise a user, checked after apply.
async fn check(example: &str, tf: &Tf, op: &Operator, ns: &str, token: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    match example {
        "hello-python" | "hello-node" => {
            let url = output_str(tf, "invoke_url");
            let got = invoke(&http, &url, token, json!({"name": "you"})).await;
            let runtime = if example == "hello-node" {
                "node"
            } else {
                "python"
            };
            assert_eq!(got["message"], "hello, you!", "{got}");
            assert_eq!(got["runtime"], runtime, "{got}");
            // Written by the dependency (humanize / ms): the build installed it.
            let timeout = got["timeout"].as_str().unwrap_or_default();
            assert!(
                timeout.contains("second") || timeout.contains("minute"),
                "the dependency's answer: {got}"
            );
        }
        "http-trigger" => {
            let url = output_str(tf, "url");
            let got = get_json(&http, &format!("{url}/hello?name=you")).await;
            assert_eq!(got["message"], "hello, you!", "{got}");
            assert_eq!(got["path"], "/hello", "{got}");
            // The public URL needs no token.
        }
        "cron-trigger" => {
            assert_eq!(output_str(tf, "phase"), "Active");
            // The handler the schedule calls answers the payload it is given.
            let url = format!(
                "{}{}",
                op.base_url,
                sless_wire::paths::function_invoke(ns, "report")
            );
            let got = invoke(&http, &url, token, json!({"kind": "minutely"})).await;
            assert_eq!(got, json!("ok"));
        }
        "job-chain" => {
            // The job's return value is in state and reached the function.
            assert_eq!(output(tf, "total"), json!(600));
            let url = output_str(tf, "invoke_url");
            let got = invoke(&http, &url, token, json!({})).await;
            assert_eq!(got, json!({"total": 600}));
        }
        "service" => {
            let url = output_str(tf, "url");
            let got = get_json(&http, &format!("{url}/status")).await;
            assert_eq!(got["greeting"], "hello", "{got}");
            assert_eq!(got["path"], "/status", "{got}");
        }
        other => panic!("no check for example {other}: add one to provider/tests/examples.rs"),
    }
}

/// Nothing of the namespace is left on the operator.
async fn assert_namespace_empty(op: &Operator, ns: &str, token: &str) {
    let http = reqwest::Client::new();
    for list in [
        sless_wire::paths::functions(ns),
        sless_wire::paths::triggers(ns),
        sless_wire::paths::jobs(ns),
        sless_wire::paths::services(ns),
    ] {
        let url = format!("{}{list}", op.base_url);
        let r = http.get(&url).bearer_auth(token).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 200, "GET {url}: {body}");
        let items = body
            .as_array()
            .or_else(|| body["items"].as_array())
            .cloned()
            .unwrap_or_default();
        assert!(items.is_empty(), "left after destroy at {list}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_applies_answers_plans_clean_and_destroys() {
    if skip() {
        return;
    }
    let root = repo_root().join("examples");
    let mut found: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("main.tf").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(
        found, EXAMPLES,
        "examples/ and this test's list differ: add a check for each new example"
    );

    let deps = example_deps();
    let tmp = tempfile::tempdir().unwrap();
    let op = Operator::start_with_env(
        &tmp.path().join("operator"),
        &[
            ("PIP_NO_INDEX", "1".to_string()),
            ("PIP_FIND_LINKS", deps.join("wheels").display().to_string()),
            ("npm_config_offline", "true".to_string()),
            (
                "npm_config_cache",
                deps.join("npm-cache").display().to_string(),
            ),
        ],
    );
    for example in EXAMPLES {
        eprintln!("--- example {example}");
        // One namespace per example: destroy must leave it empty.
        let sub = format!("examples-{example}");
        let token = op.token(&sub);
        let ns = sless_wire::namespace_for_sub(&sub);
        let case = tmp.path().join(example);
        let tf = Tf::new(&case, &op.base_url, &token);
        copy_dir(&root.join(example), &tf.dir);

        tf.apply();
        check(example, &tf, &op, &ns, &token).await;
        let (code, plan) = tf.plan_code();
        assert_eq!(
            code, 0,
            "{example}: plan after apply must be empty:\n{plan}"
        );

        tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
        let state = tf.ok(&["state", "list"]);
        assert!(
            state.trim().is_empty(),
            "{example}: state after destroy: {state}"
        );
        assert_namespace_empty(&op, &ns, &token).await;
    }
}
