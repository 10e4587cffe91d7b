//! Reconcile tests of the Trigger controller against a scripted API server.

mod kube_mock;

use http::Method;
use kube::runtime::controller::Action;
use kube_mock::{Step, finish, start, status_body};
use serde_json::{Value, json};
use sless_operator::kube::KubeOptions;
use sless_operator::kube::crd::{Trigger, TriggerSpec, TriggerStatus};
use sless_operator::kube::function::Ctx;
use sless_operator::kube::trigger::{self, FINALIZER};
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "sless-0123abcd";
const DNS: &str = "sless-fn-sless-0123abcd";
const APPLY: &str = "?&force=true&fieldManager=sless-operator";
/// An http trigger's Ingress routed through the operator (its namespace).
const OPERATOR_INGRESS: &str =
    "/apis/networking.k8s.io/v1/namespaces/sless-system/ingresses/tr-sless-0123abcd-web?";

fn trigger(kind: &str, enabled: bool) -> Trigger {
    let mut t = Trigger::new(
        "web",
        TriggerSpec {
            function: "hello".into(),
            trigger_type: kind.into(),
            schedule: (kind == "cron").then(|| "*/5 * * * *".to_string()),
            payload: (kind == "cron").then(|| "{\"tick\":true}".to_string()),
            enabled,
        },
    );
    t.metadata.namespace = Some(NS.into());
    t.metadata.uid = Some("uid-t".into());
    t.metadata.finalizers = Some(vec![FINALIZER.into()]);
    t
}

/// The target function in `phase`, always running (`minInstances: 1`; the
/// scale-to-zero tests change it).
fn function(phase: &str) -> Value {
    json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
           "metadata": {"name": "hello", "namespace": NS},
           "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "envVars": {},
                    "memoryMb": 128, "timeoutSec": 30, "minInstances": 1},
           "status": {"phase": phase}})
}

fn function_uri() -> String {
    format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/functions/hello")
}

fn get_function(phase: Option<&str>) -> Step {
    let s = Step::new(Method::GET, function_uri());
    match phase {
        Some(p) => s.answer(200, function(p)),
        None => s.answer(
            404,
            status_body(404, "NotFound", "functions \"hello\" not found"),
        ),
    }
}

fn status_step(check: impl Fn(&Value) + Send + 'static) -> Step {
    Step::new(
        Method::PATCH,
        format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/triggers/web/status{APPLY}"),
    )
    .check(check)
    .answer(200, serde_json::to_value(trigger("http", true)).unwrap())
}

const JOB_SELECTOR: &str = "app.kubernetes.io%2Fmanaged-by%3Dsless-operator%2Csless.kube5s.ru%2Fowner-kind%3DTrigger%2Csless.kube5s.ru%2Fowner-name%3Dweb%2Csless.kube5s.ru%2Fowner-namespace%3Dsless-0123abcd";

/// The cron Job list of the trigger (by owner labels), answered with `jobs`.
fn list_jobs(jobs: Vec<Value>) -> Step {
    Step::new(
        Method::GET,
        format!("/apis/batch/v1/namespaces/{DNS}/jobs?&labelSelector={JOB_SELECTOR}"),
    )
    .answer(
        200,
        json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": jobs}),
    )
}

/// A cron Job of the trigger created at `created`; `ok` finished it (2 s
/// later) with success or failure, `None` leaves it running.
fn cron_job_run(name: &str, created: &str, ok: Option<bool>) -> Value {
    let t: k8s_openapi::jiff::Timestamp = created.parse().unwrap();
    let later = |s: i64| (t + k8s_openapi::jiff::SignedDuration::from_secs(s)).to_string();
    let status = match ok {
        None => json!({"active": 1, "startTime": later(1)}),
        Some(true) => json!({"succeeded": 1, "startTime": later(1), "completionTime": later(3),
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": later(3)}]}),
        Some(false) => json!({"failed": 1, "startTime": later(1),
            "conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": later(3),
                            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}),
    };
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": DNS, "creationTimestamp": created,
                        "labels": {"sless.kube5s.ru/owner-kind": "Trigger", "sless.kube5s.ru/owner-name": "web",
                                   "sless.kube5s.ru/owner-namespace": NS}},
           "spec": {"template": {"spec": {"containers": []}}},
           "status": status})
}

async fn run(t: Trigger, steps: Vec<Step>) -> (Action, kube_mock::Outcome) {
    let (client, task) = start(steps);
    let ctx = Arc::new(Ctx::new(client, KubeOptions::example()));
    let action = tokio::time::timeout(
        Duration::from_secs(10),
        trigger::reconcile(Arc::new(t), ctx.clone()),
    )
    .await
    .expect("reconcile hung")
    .expect("reconcile failed");
    drop(ctx);
    (action, finish(task).await)
}

#[tokio::test]
async fn trigger_waits_and_requeues_while_the_function_is_not_ready() {
    let (action, out) = run(
        trigger("http", true),
        vec![
            get_function(Some("Building")),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Waiting");
                assert!(
                    b["status"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("Building")
                );
                assert_eq!(
                    b["status"]["url"], "https://fn.example.test/sless-0123abcd/web",
                    "URL known at once"
                );
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(trigger::REQUEUE_WAITING));
    assert_eq!(trigger::REQUEUE_WAITING, Duration::from_secs(15));

    // A missing function: also waiting, nothing created.
    let (action, out) = run(
        trigger("cron", true),
        vec![
            get_function(None),
            status_step(|b| {
                assert!(
                    b["status"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("does not exist")
                )
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(trigger::REQUEUE_WAITING));
}

#[tokio::test]
async fn http_trigger_gets_service_ingress_and_url_once_the_function_is_ready() {
    let (action, out) = run(
        trigger("http", true),
        vec![
            get_function(Some("Ready")),
            Step::new(
                Method::PATCH,
                format!("/api/v1/namespaces/{DNS}/services/tr-web{APPLY}"),
            )
            .check(|b| {
                assert_eq!(b["spec"]["selector"]["sless.kube5s.ru/app"], "fn-hello");
                assert_eq!(
                    b["metadata"]["labels"]["sless.kube5s.ru/owner-kind"],
                    "Trigger"
                );
            }),
            Step::new(
                Method::PATCH,
                format!("/apis/networking.k8s.io/v1/namespaces/{DNS}/ingresses/tr-web{APPLY}"),
            )
            .check(|b| {
                let rule = &b["spec"]["rules"][0];
                assert_eq!(rule["host"], "fn.example.test");
                assert_eq!(rule["http"]["paths"][0]["path"], "/sless-0123abcd/web");
                assert_eq!(
                    rule["http"]["paths"][0]["backend"]["service"]["name"],
                    "tr-web"
                );
            }),
            // A route through the operator (the function scaled to zero
            // before) is removed.
            Step::new(Method::DELETE, OPERATOR_INGRESS)
                .answer(404, status_body(404, "NotFound", "gone")),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Active");
                assert_eq!(
                    b["status"]["url"],
                    "https://fn.example.test/sless-0123abcd/web"
                );
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["Active"]);
    assert_eq!(action, Action::requeue(trigger::REQUEUE_ACTIVE));
}

#[tokio::test]
async fn cron_trigger_gets_a_forbid_concurrency_cronjob_with_pinned_curl() {
    let (_, out) = run(
        trigger("cron", true),
        vec![
            get_function(Some("Ready")),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            )
            .check(|b| {
                assert_eq!(b["spec"]["schedule"], "*/5 * * * *");
                assert_eq!(b["spec"]["timeZone"], "Etc/UTC");
                assert_eq!(b["spec"]["concurrencyPolicy"], "Forbid");
                assert_eq!(b["spec"]["suspend"], false);
                assert_eq!(
                    b["spec"]["jobTemplate"]["metadata"]["labels"]["sless.kube5s.ru/owner-name"],
                    "web",
                    "the Jobs carry the owner labels (watched)"
                );
                let c = &b["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["image"], "curlimages/curl:8.5.0");
                let args: Vec<&str> = c["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                assert!(args.contains(&"{\"tick\":true}"));
                assert_eq!(
                    *args.last().unwrap(),
                    "http://fn-hello.sless-fn-sless-0123abcd.svc.cluster.local/"
                );
            }),
            list_jobs(vec![]),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Active");
                assert!(b["status"]["url"].is_null());
                let next: k8s_openapi::jiff::Timestamp =
                    b["status"]["nextRunAt"].as_str().unwrap().parse().unwrap();
                assert!(next > k8s_openapi::jiff::Timestamp::now());
                assert_eq!(next.as_second() % 300, 0, "on a */5 minute: {next}");
                assert!(b["status"]["runs"].is_null(), "no runs yet");
                assert!(b["status"]["lastRun"].is_null());
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["Active"]);
}

#[tokio::test]
async fn a_six_field_schedule_with_zero_seconds_runs_as_five_fields() {
    let mut t = trigger("cron", true);
    t.spec.schedule = Some("0 */5 * * * *".into());
    let (_, out) = run(
        t,
        vec![
            get_function(Some("Ready")),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            )
            .check(|b| assert_eq!(b["spec"]["schedule"], "*/5 * * * *")),
            list_jobs(vec![]),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Active");
                let next: k8s_openapi::jiff::Timestamp =
                    b["status"]["nextRunAt"].as_str().unwrap().parse().unwrap();
                assert_eq!(next.as_second() % 300, 0, "on a */5 minute: {next}");
            }),
        ],
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn a_schedule_with_seconds_kubernetes_cannot_run_gets_no_cronjob_and_says_why() {
    // Written past the REST API (which refuses it): no CronJob is applied
    // (the API server would refuse it on every reconcile), an older one is
    // removed, and the status explains; nothing is retried until the
    // trigger changes.
    for enabled in [true, false] {
        let mut t = trigger("cron", enabled);
        t.spec.schedule = Some("*/10 * * * * *".into());
        let (action, out) = run(
            t,
            vec![
                Step::new(
                    Method::DELETE,
                    format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web?"),
                )
                .answer(404, status_body(404, "NotFound", "gone")),
                status_step(move |b| {
                    let s = &b["status"];
                    assert_eq!(s["phase"], if enabled { "Waiting" } else { "Disabled" });
                    let message = s["message"].as_str().unwrap();
                    assert!(message.contains("minute resolution"), "{message}");
                    assert!(s["nextRunAt"].is_null());
                    assert_eq!(s["conditions"][0]["reason"], "UnsupportedSchedule");
                }),
            ],
        )
        .await;
        out.assert_complete();
        assert!(out.events.is_empty());
        assert_eq!(action, Action::await_change());
    }
}

/// An Active cron trigger that counted `counted` runs up to Job `tr-web-a`.
fn active_cron(schedule: &str, counted: u64, last_run: Option<Value>) -> Trigger {
    let mut t = trigger("cron", true);
    t.spec.schedule = Some(schedule.to_string());
    let mut st: TriggerStatus = serde_json::from_value(json!({
        "phase": "Active",
        "nextRunAt": "2026-12-02T10:05:00Z",
        "runs": counted,
        "counted": {"job": "tr-web-a", "createdAt": "2026-12-02T10:00:00Z"},
        "lastRun": last_run,
    }))
    .unwrap();
    sless_operator::kube::function::set_condition(
        &mut st.conditions,
        "Ready",
        true,
        "Active",
        "children applied",
    );
    t.status = Some(st);
    t
}

#[tokio::test]
async fn a_finished_cron_job_is_recorded_in_the_status() {
    // Job a was counted (and was running) at the last reconcile; since then
    // it succeeded and Job b ran and failed: the watch on the trigger's Jobs
    // reconciles, and the status gets runs, lastRun and a new nextRunAt.
    let (action, out) = run(
        active_cron("*/5 * * * *", 1, None),
        vec![
            get_function(Some("Ready")),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            ),
            list_jobs(vec![
                cron_job_run("tr-web-b", "2026-12-02T10:05:00Z", Some(false)),
                cron_job_run("tr-web-a", "2026-12-02T10:00:00Z", Some(true)),
            ]),
            status_step(|b| {
                let s = &b["status"];
                assert_eq!(s["phase"], "Active");
                assert_eq!(s["runs"], 2, "a counted once, b new");
                assert_eq!(s["counted"]["job"], "tr-web-b");
                assert_eq!(s["counted"]["createdAt"], "2026-12-02T10:05:00Z");
                let last = &s["lastRun"];
                assert_eq!(last["job"], "tr-web-b", "the newest finished Job");
                assert_eq!(last["ok"], false);
                assert_eq!(last["startedAt"], "2026-12-02T10:05:01Z");
                assert_eq!(last["completedAt"], "2026-12-02T10:05:03Z");
                assert!(
                    last["message"]
                        .as_str()
                        .unwrap()
                        .contains("BackoffLimitExceeded"),
                    "{last}"
                );
                let next: k8s_openapi::jiff::Timestamp =
                    s["nextRunAt"].as_str().unwrap().parse().unwrap();
                assert!(next > k8s_openapi::jiff::Timestamp::now(), "recomputed");
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert!(out.events.is_empty(), "already Active: no event");
    assert_eq!(action, Action::requeue(trigger::REQUEUE_ACTIVE));
}

#[tokio::test]
async fn an_unchanged_cron_trigger_writes_no_status() {
    // A yearly schedule, so the next run time is the one already recorded.
    let schedule = "0 0 1 1 *";
    let last = json!({"job": "tr-web-a", "startedAt": "2026-12-02T10:00:01Z",
                      "completedAt": "2026-12-02T10:00:03Z", "ok": true});
    let mut t = active_cron(schedule, 1, Some(last));
    t.status.as_mut().unwrap().next_run_at = trigger::next_run_at(schedule, chrono::Utc::now());
    let (_, out) = run(
        t,
        vec![
            get_function(Some("Ready")),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            ),
            list_jobs(vec![cron_job_run(
                "tr-web-a",
                "2026-12-02T10:00:00Z",
                Some(true),
            )]),
        ],
    )
    .await;
    out.assert_complete();
    assert!(out.events.is_empty());
}

#[tokio::test]
async fn disabled_triggers_remove_http_children_and_suspend_cron() {
    let (action, out) = run(
        trigger("http", false),
        vec![
            Step::new(
                Method::DELETE,
                format!("/apis/networking.k8s.io/v1/namespaces/{DNS}/ingresses/tr-web?"),
            )
            .answer(404, status_body(404, "NotFound", "gone")),
            Step::new(
                Method::DELETE,
                format!("/api/v1/namespaces/{DNS}/services/tr-web?"),
            )
            .answer(404, status_body(404, "NotFound", "gone")),
            Step::new(Method::DELETE, OPERATOR_INGRESS)
                .answer(404, status_body(404, "NotFound", "gone")),
            status_step(|b| assert_eq!(b["status"]["phase"], "Disabled")),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::await_change());
    let (_, out) = run(
        trigger("cron", false),
        vec![
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            )
            .check(|b| assert_eq!(b["spec"]["suspend"], true)),
            // A run going when it was disabled is still recorded.
            list_jobs(vec![cron_job_run(
                "tr-web-a",
                "2026-12-02T10:00:00Z",
                Some(true),
            )]),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Disabled");
                assert!(b["status"]["nextRunAt"].is_null(), "not scheduled");
                assert_eq!(b["status"]["runs"], 1);
                assert_eq!(b["status"]["lastRun"]["ok"], true);
            }),
        ],
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn deleting_a_trigger_deletes_its_children() {
    let mut t = trigger("http", true);
    t.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let gone = |kind: &str| status_body(404, "NotFound", &format!("{kind} gone"));
    let (_, out) = run(
        t.clone(),
        vec![
            Step::new(
                Method::DELETE,
                format!("/apis/networking.k8s.io/v1/namespaces/{DNS}/ingresses/tr-web?"),
            ),
            Step::new(
                Method::DELETE,
                format!("/api/v1/namespaces/{DNS}/services/tr-web?"),
            ),
            Step::new(Method::DELETE, OPERATOR_INGRESS).answer(404, gone("ingress")),
            Step::new(
                Method::DELETE,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web?"),
            )
            .answer(404, gone("cronjob")),
            Step::new(
                Method::PATCH,
                format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/triggers/web?"),
            )
            .check(|b| assert_eq!(b[1]["op"], "remove"))
            .answer(200, serde_json::to_value(&t).unwrap()),
        ],
    )
    .await;
    out.assert_complete();
}

// Scale to zero.

/// A Ready function that scales to zero, with `annotations`.
fn get_scaling_function(annotations: Value) -> Step {
    let mut f = function("Ready");
    f["spec"]["minInstances"] = json!(0);
    f["metadata"]["annotations"] = annotations;
    Step::new(Method::GET, function_uri()).answer(200, f)
}

#[tokio::test]
async fn http_trigger_of_a_function_that_scales_to_zero_is_routed_through_the_operator() {
    let (action, out) = run(
        trigger("http", true),
        vec![
            get_scaling_function(json!({})),
            Step::new(
                Method::PATCH,
                format!(
                    "/apis/networking.k8s.io/v1/namespaces/sless-system/ingresses/tr-sless-0123abcd-web{APPLY}"
                ),
            )
            .check(|b| {
                assert_eq!(b["metadata"]["namespace"], "sless-system");
                assert_eq!(b["metadata"]["labels"]["sless.kube5s.ru/owner-kind"], "Trigger");
                assert_eq!(b["metadata"]["labels"]["sless.kube5s.ru/owner-namespace"], NS);
                let rule = &b["spec"]["rules"][0];
                assert_eq!(rule["host"], "fn.example.test");
                let path = &rule["http"]["paths"][0];
                assert_eq!(path["path"], "/sless-0123abcd/web", "the same public URL");
                assert_eq!(path["backend"]["service"]["name"], "sless-operator");
                assert_eq!(path["backend"]["service"]["port"]["number"], 80);
            }),
            // The direct route (Ingress and Service beside the pods) goes.
            Step::new(
                Method::DELETE,
                format!("/apis/networking.k8s.io/v1/namespaces/{DNS}/ingresses/tr-web?"),
            ),
            Step::new(
                Method::DELETE,
                format!("/api/v1/namespaces/{DNS}/services/tr-web?"),
            )
            .answer(404, status_body(404, "NotFound", "gone")),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Active");
                assert_eq!(
                    b["status"]["url"],
                    "https://fn.example.test/sless-0123abcd/web"
                );
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(trigger::REQUEUE_ACTIVE));
}

#[tokio::test]
async fn a_cron_run_wakes_a_function_that_scales_to_zero_ahead_of_time() {
    // Every minute: the next run is always within the warm-up lead.
    let mut t = trigger("cron", true);
    t.spec.schedule = Some("* * * * *".into());
    let (action, out) = run(
        t,
        vec![
            get_scaling_function(json!({})),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            ),
            list_jobs(vec![]),
            Step::new(Method::PATCH, format!("{}?", function_uri()))
                .check(|b| {
                    let keep: k8s_openapi::jiff::Timestamp = b["metadata"]["annotations"]
                        [sless_operator::kube::scale::KEEP_UNTIL]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    let now = k8s_openapi::jiff::Timestamp::now();
                    // The next run (within 60 s) + timeoutSec 30 + 60 s grace.
                    let ahead = keep.duration_since(now).as_secs();
                    assert!((89..=150).contains(&ahead), "kept {ahead} s ahead");
                    assert_eq!(keep.as_second() % 60, 30, "a run on the minute + 90 s");
                    assert_eq!(b.as_object().unwrap().len(), 1, "only metadata: {b}");
                })
                .answer(200, function("Ready")),
            status_step(|b| assert_eq!(b["status"]["phase"], "Active")),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(trigger::REQUEUE_ACTIVE));

    // Already kept long enough: no second patch.
    let mut t = trigger("cron", true);
    t.spec.schedule = Some("* * * * *".into());
    let later = (k8s_openapi::jiff::Timestamp::now()
        + k8s_openapi::jiff::SignedDuration::from_secs(600))
    .to_string();
    let (_, out) = run(
        t,
        vec![
            get_scaling_function(json!({sless_operator::kube::scale::KEEP_UNTIL: later})),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            ),
            list_jobs(vec![]),
            status_step(|_| {}),
        ],
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn a_distant_cron_run_does_not_wake_the_function_yet() {
    // Yearly: far beyond the lead, nothing is patched.
    let mut t = trigger("cron", true);
    t.spec.schedule = Some("0 0 1 1 *".into());
    let (action, out) = run(
        t,
        vec![
            get_scaling_function(json!({})),
            Step::new(
                Method::PATCH,
                format!("/apis/batch/v1/namespaces/{DNS}/cronjobs/tr-web{APPLY}"),
            ),
            list_jobs(vec![]),
            status_step(|_| {}),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(trigger::REQUEUE_ACTIVE));
}
