//! Reconcile tests of the Trigger controller against a scripted API server.

mod kube_mock;

use http::Method;
use kube::runtime::controller::Action;
use kube_mock::{Step, finish, start, status_body};
use serde_json::{Value, json};
use sless_operator::kube::KubeOptions;
use sless_operator::kube::crd::{Trigger, TriggerSpec};
use sless_operator::kube::function::Ctx;
use sless_operator::kube::trigger::{self, FINALIZER};
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "sless-0123abcd";
const DNS: &str = "sless-fn-sless-0123abcd";
const APPLY: &str = "?&force=true&fieldManager=sless-operator";

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

fn function(phase: &str) -> Value {
    json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
           "metadata": {"name": "hello", "namespace": NS},
           "spec": {"runtime": "python3.11", "entrypoint": "main.handler", "envVars": {}, "memoryMb": 128, "timeoutSec": 30},
           "status": {"phase": phase}})
}

fn get_function(phase: Option<&str>) -> Step {
    let s = Step::new(
        Method::GET,
        format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/functions/hello"),
    );
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
                assert_eq!(b["spec"]["concurrencyPolicy"], "Forbid");
                assert_eq!(b["spec"]["suspend"], false);
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
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Active");
                assert!(b["status"]["url"].is_null());
            }),
        ],
    )
    .await;
    out.assert_complete();
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
            status_step(|b| assert_eq!(b["status"]["phase"], "Disabled")),
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
