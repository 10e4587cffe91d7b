//! Acceptance tests of `sless_trigger` with the real terraform CLI, provider
//! and operator (gated on `TF_ACC=1`, see `acceptance.rs`): an http trigger
//! answering on its public URL, cron triggers firing on a seconds schedule
//! without overlapping runs, an invalid schedule failing at plan time.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Answers with what it received.
const ECHO_PY: &str = "def handler(event, context):\n    return {'method': event['method'], 'path': event['path'], 'query': event['query'], 'body': event['body']}\n";

/// Appends `start end body` to the file named by `OUT`, after sleeping `SLEEP` seconds.
const TICK_PY: &str = r#"import json
import os
import time


def handler(event, context):
    start = time.time()
    time.sleep(float(os.environ.get('SLEEP', '0')))
    end = time.time()
    with open(os.environ['OUT'], 'a') as f:
        f.write('%.3f %.3f %s\n' % (start, end, json.dumps(event.get('body'))))
    return 'ok'
"#;

fn config(extra: &str) -> String {
    format!(
        r#"{header}
resource "sless_function" "echo" {{
  name       = "acc-echo"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/echo"
}}

resource "sless_function" "fast" {{
  name       = "acc-fast"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/tick"
  env_vars = {{
    OUT = "${{abspath(path.module)}}/fast.log"
  }}
}}

resource "sless_function" "slow" {{
  name       = "acc-slow"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/tick-slow"
  env_vars = {{
    OUT   = "${{abspath(path.module)}}/slow.log"
    SLEEP = "2.5"
  }}
}}

resource "sless_trigger" "web" {{
  name     = "acc-web"
  function = sless_function.echo.name
  type     = "http"
}}

resource "sless_trigger" "fast" {{
  name     = "acc-fast"
  function = sless_function.fast.name
  type     = "cron"
  schedule = "*/2 * * * * *"
  payload  = jsonencode({{ from = "cron" }})
}}

resource "sless_trigger" "slow" {{
  name     = "acc-slow"
  function = sless_function.slow.name
  type     = "cron"
  schedule = "* * * * * *"
}}

output "url" {{
  value = sless_trigger.web.url
}}
{extra}"#,
        header = tf_header()
    )
}

/// `(start, end, body)` of each finished run recorded in `path`.
fn runs(path: &Path) -> Vec<(f64, f64, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            let s = it.next()?.parse().ok()?;
            let e = it.next()?.parse().ok()?;
            Some((s, e, it.next().unwrap_or_default().to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_cron_triggers_with_real_terraform() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "triggers@example.com";
    let token = op.token(sub);
    let ns = sless_wire::namespace_for_sub(sub);
    let tf = Tf::new(root.path(), &op.base_url, &token);
    write(&tf.dir.join("echo/main.py"), ECHO_PY.as_bytes());
    write(&tf.dir.join("tick/main.py"), TICK_PY.as_bytes());
    // Distinct code: identical zips uploaded at once hit an operator race
    // (reported separately), which is not what this test is about.
    write(
        &tf.dir.join("tick-slow/main.py"),
        format!("# slow\n{TICK_PY}").as_bytes(),
    );
    tf.write_main(&config(""));

    // 1. Apply: the http trigger has a public URL that needs no token.
    tf.apply();
    let url = tf.outputs()["url"]["value"]
        .as_str()
        .expect("url output")
        .to_string();
    assert_eq!(
        url,
        format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::trigger_public(&ns, "acc-web")
        )
    );
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{url}/orders/42?verbose=1&tag=a"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got: Value = r.json().await.unwrap();
    assert_eq!(got["method"], "GET", "{got}");
    assert_eq!(got["path"], "/orders/42", "{got}");
    assert_eq!(got["query"]["verbose"], "1", "{got}");
    assert_eq!(got["query"]["tag"], "a", "{got}");
    let r = http
        .post(&url)
        .json(&serde_json::json!({ "numbers": [1, 2, 3] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got: Value = r.json().await.unwrap();
    assert_eq!(got["method"], "POST", "{got}");
    assert_eq!(got["body"]["numbers"][2], 3, "{got}");

    // 2. The fast cron trigger fires at least twice within a bounded wait,
    //    with its payload as the body.
    let fast = tf.dir.join("fast.log");
    let seen = eventually(Duration::from_secs(30), "two runs of acc-fast", || {
        let r = runs(&fast);
        async move { (r.len() >= 2).then_some(r) }
    })
    .await;
    assert!(
        seen.iter()
            .all(|(_, _, body)| body == r#"{"from": "cron"}"#),
        "the payload is the body: {seen:?}"
    );

    // 3. The slow one (2.5 s runs, a tick every second) never overlaps.
    let slow = tf.dir.join("slow.log");
    let seen = eventually(Duration::from_secs(40), "three runs of acc-slow", || {
        let r = runs(&slow);
        async move { (r.len() >= 3).then_some(r) }
    })
    .await;
    for pair in seen.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "two runs of acc-slow overlapped: {pair:?} (all: {seen:?})"
        );
    }

    // 4. The server moved next_run_at/last_run_at on: still no changes.
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after the cron runs must be empty:\n{plan}");

    // 5. Disabling the http trigger and changing a schedule are in-place
    //    updates: the URL stays, and answers 404 while disabled.
    let changed = config("")
        .replace(
            "type     = \"http\"",
            "type     = \"http\"\n  enabled  = false",
        )
        .replace("\"*/2 * * * * *\"", "\"*/3 * * * * *\"");
    tf.write_main(&changed);
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 2, "{plan}");
    for addr in ["sless_trigger.web", "sless_trigger.fast"] {
        assert!(
            flat(&plan).contains(&format!("{addr} will be updated in-place")),
            "{addr}: {plan}"
        );
    }
    tf.apply();
    assert_eq!(
        tf.outputs()["url"]["value"],
        url.as_str(),
        "the URL is stable"
    );
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 404, "a disabled http trigger answers 404");
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after the update must be empty:\n{plan}");
    tf.write_main(&config(""));
    tf.apply();
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200, "enabled again, the same URL answers");

    // 6. An invalid schedule fails at plan time, naming the field.
    tf.write_main(&config(
        r#"
resource "sless_trigger" "bad" {
  name     = "acc-bad"
  function = sless_function.fast.name
  type     = "cron"
  schedule = "every 5 minutes"
}
"#,
    ));
    let out = tf.run(&["plan", "-input=false", "-no-color"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(!flat(&all).contains("TERRAFORM CRASH"), "{all}");
    assert!(flat(&all).contains("Invalid schedule"), "{all}");
    assert!(flat(&all).contains("every 5 minutes"), "{all}");
    assert!(
        flat(&all).contains(r#"schedule = "every 5 minutes""#),
        "{all}"
    );
    tf.write_main(&config(""));

    // 7. Destroy: the public URL answers 404 (not 502) and the trigger is gone.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 404, "the URL of a destroyed trigger");
    let r = http
        .get(format!(
            "{}{}",
            op.base_url,
            sless_wire::paths::trigger(&ns, "acc-web")
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// A trigger's own `wait_timeout_sec` bounds its create wait (the provider's
/// is 300 s here): a trigger of a function that does not exist stays
/// Waiting, and apply gives up after 3 s saying what it last saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_waits_only_its_own_wait_timeout_sec() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let token = op.token("trigger-wait@example.com");
    let tf = Tf::new(root.path(), &op.base_url, &token);
    tf.write_main(&format!(
        r#"{header}
resource "sless_trigger" "orphan" {{
  name             = "acc-orphan"
  function         = "acc-nobody"
  type             = "http"
  wait_timeout_sec = 3
}}
"#,
        header = tf_header()
    ));
    let start = std::time::Instant::now();
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let took = start.elapsed();
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(!flat(&all).contains("TERRAFORM CRASH"), "{all}");
    assert!(
        flat(&all).contains("Timed out waiting for trigger acc-orphan"),
        "{all}"
    );
    assert!(flat(&all).contains("gave up after 3 s"), "{all}");
    assert!(flat(&all).contains("phase Waiting"), "{all}");
    assert!(
        took < Duration::from_secs(60),
        "the trigger's 3 s, not the provider's 300 s: took {took:?}"
    );
    // The half-created trigger is in state (tainted); destroy removes it.
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
}
