//! Reconcile tests of the FunctionJob controller against a scripted API
//! server: build, run once per generation, result from the pod log.

mod kube_mock;

use http::Method;
use kube::runtime::controller::Action;
use kube_mock::{Step, finish, start};
use serde_json::{Value, json};
use sless_operator::kube::KubeOptions;
use sless_operator::kube::builders::RESULT_MARKER;
use sless_operator::kube::crd::{
    BuildState, BuildStatus, CodeRef, FunctionJob, FunctionJobSpec, FunctionJobStatus,
};
use sless_operator::kube::function::Ctx;
use sless_operator::kube::job::{self, FINALIZER};
use sless_operator::kube::names;
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "sless-0123abcd";
const DNS: &str = "sless-fn-sless-0123abcd";
const KEY: &str = "code/sless-0123abcd/cccc.python3.11.tar.gz";

fn tag() -> String {
    names::image_tag(KEY)
}

fn status_uri() -> String {
    format!(
        "/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/functionjobs/once/status?&force=true&fieldManager=sless-operator"
    )
}

/// Where a job is found.
enum Scenario {
    CodeUploaded,
    Built,
    Running,
    Done,
}

fn fjob(s: Scenario) -> FunctionJob {
    let mut j = FunctionJob::new(
        "once",
        FunctionJobSpec {
            runtime: "python3.11".into(),
            entrypoint: "main.handler".into(),
            env_vars: [("K".to_string(), "v".to_string())].into(),
            secret_env_vars: Default::default(),
            input: "{\"x\": 2}".into(),
            run_id: 1,
            memory_mb: 128,
            timeout_sec: 30,
            code: Some(CodeRef {
                key: KEY.into(),
                sha256: "cccc".into(),
                source_hash: None,
            }),
        },
    );
    j.metadata.namespace = Some(NS.into());
    j.metadata.generation = Some(2);
    j.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let built = Some(BuildStatus {
        tag: tag(),
        job: format!("build-job-once-{}", tag()),
        state: BuildState::Succeeded,
    });
    j.status = match s {
        Scenario::CodeUploaded => None,
        Scenario::Built => Some(FunctionJobStatus {
            phase: Some("Succeeded".into()),
            observed_generation: Some(1),
            message: Some("\"old\"".into()),
            build: built,
            run: Some("run-once-1".into()),
            ..Default::default()
        }),
        Scenario::Running => Some(FunctionJobStatus {
            phase: Some("Running".into()),
            observed_generation: Some(2),
            build: built,
            run: Some("run-once-2".into()),
            started_at: Some("2026-12-02T14:00:00Z".into()),
            ..Default::default()
        }),
        Scenario::Done => Some(FunctionJobStatus {
            phase: Some("Succeeded".into()),
            observed_generation: Some(2),
            message: Some("4".into()),
            build: built,
            run: Some("run-once-2".into()),
            ..Default::default()
        }),
    };
    if let Some(st) = j.status.as_mut() {
        let image = format!("registry.test/{NS}/once:{}", tag());
        st.image_ref = Some(image.clone());
        sless_operator::kube::function::set_condition(
            &mut st.conditions,
            "Built",
            true,
            "Built",
            &image,
        );
    }
    j
}

fn status_step(check: impl Fn(&Value) + Send + 'static) -> Step {
    Step::new(Method::PATCH, status_uri()).check(check).answer(
        200,
        serde_json::to_value(fjob(Scenario::CodeUploaded)).unwrap(),
    )
}

async fn run(j: FunctionJob, steps: Vec<Step>) -> (Action, kube_mock::Outcome) {
    let (client, task) = start(steps);
    let ctx = Arc::new(Ctx::new(client, KubeOptions::example()));
    let action = tokio::time::timeout(
        Duration::from_secs(10),
        job::reconcile(Arc::new(j), ctx.clone()),
    )
    .await
    .expect("reconcile hung")
    .expect("reconcile failed");
    drop(ctx);
    (action, finish(task).await)
}

fn k8s_job(name: &str, status: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": DNS},
           "spec": {"template": {"spec": {"containers": []}}}, "status": status})
}

fn log_steps(log: &str) -> Vec<Step> {
    vec![
        Step::new(Method::GET, format!("/apis/batch/v1/namespaces/{DNS}/jobs/run-once-2")).answer(
            200,
            k8s_job("run-once-2", json!({"succeeded": 1})),
        ),
        Step::new(Method::GET, format!("/api/v1/namespaces/{DNS}/pods?&labelSelector=job-name%3Drun-once-2")).answer(
            200,
            json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                   "items": [{"metadata": {"name": "run-once-2-abcde", "namespace": DNS}}]}),
        ),
        Step::new(
            Method::GET,
            format!("/api/v1/namespaces/{DNS}/pods/run-once-2-abcde/log?&container=function&limitBytes=2097152"),
        )
        .text(log),
    ]
}

#[tokio::test]
async fn a_job_with_code_is_built_first() {
    let (action, out) = run(
        fjob(Scenario::CodeUploaded),
        vec![
            Step::new(
                Method::POST,
                format!("/apis/batch/v1/namespaces/{DNS}/jobs?"),
            )
            .status(201)
            .check(|b| assert_eq!(b["metadata"]["name"], format!("build-job-once-{}", tag()))),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Building");
                assert_eq!(b["status"]["observedGeneration"], 2);
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(job::REQUEUE_ACTIVE));
}

#[tokio::test]
async fn a_new_generation_reruns_without_rebuilding() {
    let (_, out) = run(
        fjob(Scenario::Built),
        vec![
            Step::new(
                Method::POST,
                format!("/api/v1/namespaces/{DNS}/configmaps?"),
            )
            .status(201)
            .check(|b| assert_eq!(b["data"]["event.json"], "{\"x\": 2}")),
            Step::new(
                Method::POST,
                format!("/apis/batch/v1/namespaces/{DNS}/jobs?"),
            )
            .status(201)
            .check(|b| {
                assert_eq!(b["metadata"]["name"], "run-once-2");
                assert_eq!(b["spec"]["backoffLimit"], 0);
                let c = &b["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["image"], format!("registry.test/{NS}/once:{}", tag()));
                assert!(
                    c["args"][0]
                        .as_str()
                        .unwrap()
                        .contains("--once /input/event.json")
                );
            }),
            status_step(|b| {
                let s = &b["status"];
                assert_eq!(s["phase"], "Running");
                assert_eq!(s["run"], "run-once-2");
                assert_eq!(s["observedGeneration"], 2);
                assert!(s["message"].is_null(), "the old result is cleared");
            }),
        ],
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn the_pod_log_result_becomes_the_message() {
    let log = format!(
        "hello from the handler\n\n{RESULT_MARKER}\n{{\"ok\": true, \"result\": {{\"sum\": 4}}}}\n"
    );
    let mut steps = log_steps(&log);
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["phase"], "Succeeded");
        assert_eq!(b["status"]["message"], "{\"sum\":4}");
        assert!(b["status"]["completedAt"].is_string());
    }));
    let (action, out) = run(fjob(Scenario::Running), steps).await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["RunSucceeded"]);
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn a_raising_handler_fails_with_its_error_and_output() {
    let log = format!(
        "Traceback: boom at line 3\n\n{RESULT_MARKER}\n{{\"ok\": false, \"error\": \"boom\", \"type\": \"ValueError\"}}\n"
    );
    let mut steps = log_steps(&log);
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["phase"], "Failed");
        let e = b["status"]["error"].as_str().unwrap();
        assert!(e.starts_with("ValueError: boom"), "{e}");
        assert!(e.contains("Traceback: boom at line 3"), "{e}");
        assert!(b["status"]["message"].is_null());
    }));
    let (_, out) = run(fjob(Scenario::Running), steps).await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["RunFailed"]);
}

#[tokio::test]
async fn a_running_job_is_polled_and_a_finished_one_left_alone() {
    let (action, out) = run(
        fjob(Scenario::Running),
        vec![
            Step::new(
                Method::GET,
                format!("/apis/batch/v1/namespaces/{DNS}/jobs/run-once-2"),
            )
            .answer(200, k8s_job("run-once-2", json!({"active": 1}))),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(job::REQUEUE_ACTIVE));
    let (action, out) = run(fjob(Scenario::Done), vec![]).await;
    out.assert_complete();
    assert_eq!(action, Action::await_change());
}
