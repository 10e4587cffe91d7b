//! Reconcile tests of the Function controller against a scripted API server
//! (tower-test): every request it makes is asserted, in order.

mod kube_mock;

use http::Method;
use kube_mock::{Step, finish, start, status_body};
use serde_json::{Value, json};
use sless_operator::kube::KubeOptions;
use sless_operator::kube::crd::{
    BuildState, BuildStatus, CodeRef, Function, FunctionSpec, FunctionStatus,
};
use sless_operator::kube::function::{self, Ctx, FINALIZER};
use sless_operator::kube::names;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "sless-0123abcd";
const DNS: &str = "sless-fn-sless-0123abcd";
const KEY: &str = "code/sless-0123abcd/aaaa.python3.11.tar.gz";

fn tag() -> String {
    names::image_tag(KEY)
}
fn image() -> String {
    format!("registry.test/{NS}/hello:{}", tag())
}
fn job_name() -> String {
    format!("build-hello-{}", tag())
}
fn status_uri() -> String {
    format!(
        "/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/functions/hello/status?&force=true&fieldManager=sless-operator"
    )
}
fn apply_uri(kind: &str, name: &str) -> String {
    let group = if kind == "deployments" {
        "/apis/apps/v1"
    } else {
        "/api/v1"
    };
    format!("{group}/namespaces/{DNS}/{kind}/{name}?&force=true&fieldManager=sless-operator")
}
fn job_uri() -> String {
    format!("/apis/batch/v1/namespaces/{DNS}/jobs/{}", job_name())
}

/// The situations a Function can be found in.
enum Scenario {
    /// Just created: no finalizer yet.
    New,
    /// Code uploaded, never built.
    CodeUploaded,
    /// The build for the current code key was started (status survives restarts).
    Building,
    /// The build succeeded and the function was Ready.
    Ready,
    /// The build failed.
    BuildFailed,
    /// Being deleted.
    Deleting { building: bool },
}

fn function(s: Scenario) -> Function {
    let mut f = Function::new(
        "hello",
        FunctionSpec {
            runtime: "python3.11".into(),
            entrypoint: "main.handler".into(),
            env_vars: BTreeMap::from([("B".into(), "2".into()), ("A".into(), "1".into())]),
            secret_env_vars: Default::default(),
            memory_mb: 128,
            timeout_sec: 30,
            min_instances: 0,
            idle_timeout_sec: 300,
            code: Some(CodeRef {
                key: KEY.into(),
                sha256: "aaaa".into(),
                source_hash: None,
            }),
        },
    );
    f.metadata.namespace = Some(NS.into());
    f.metadata.uid = Some("uid-1".into());
    f.metadata.resource_version = Some("7".into());
    f.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let build = |state| {
        Some(BuildStatus {
            tag: tag(),
            job: job_name(),
            state,
        })
    };
    match s {
        Scenario::New => {
            f.metadata.finalizers = None;
        }
        Scenario::CodeUploaded => {}
        Scenario::Building => {
            f.status = Some(FunctionStatus {
                phase: Some("Building".into()),
                message: Some(format!("building {}", image())),
                build: build(BuildState::Running),
                ..Default::default()
            })
        }
        Scenario::Ready => {
            f.status = Some(FunctionStatus {
                phase: Some("Ready".into()),
                build: build(BuildState::Succeeded),
                image_ref: Some(image()),
                code_sha256: Some("aaaa".into()),
                last_built_at: Some("2026-12-02T14:00:00Z".into()),
                url: Some(format!("http://fn-hello.{DNS}.svc.cluster.local")),
                instances: 1,
                ..Default::default()
            });
            let st = f.status.as_mut().unwrap();
            function::set_condition(&mut st.conditions, "Built", true, "Built", &image());
            function::set_condition(
                &mut st.conditions,
                "Ready",
                true,
                "Available",
                "the Deployment is available",
            );
        }
        Scenario::BuildFailed => {
            f.status = Some(FunctionStatus {
                phase: Some("Failed".into()),
                message: Some("build failed: BackoffLimitExceeded; see the build log".into()),
                build: build(BuildState::Failed),
                ..Default::default()
            });
            let st = f.status.as_mut().unwrap();
            function::set_condition(
                &mut st.conditions,
                "Built",
                false,
                "BuildFailed",
                "build failed: BackoffLimitExceeded; see the build log",
            );
            function::set_condition(
                &mut st.conditions,
                "Ready",
                false,
                "BuildFailed",
                "the build failed; waiting for new code",
            );
        }
        Scenario::Deleting { building } => {
            f.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
            if building {
                f.status = Some(FunctionStatus {
                    phase: Some("Building".into()),
                    build: build(BuildState::Running),
                    ..Default::default()
                });
            }
        }
    }
    f
}

fn job(state: &str) -> Value {
    let status = match state {
        "running" => json!({"active": 1}),
        "succeeded" => {
            json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
        }
        _ => {
            json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]})
        }
    };
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(), "namespace": DNS},
        "spec": {"template": {"spec": {"containers": []}}},
        "status": status,
    })
}

async fn run(
    f: Function,
    steps: Vec<Step>,
) -> (kube::runtime::controller::Action, kube_mock::Outcome) {
    let (client, task) = start(steps);
    let ctx = Arc::new(Ctx::new(client, KubeOptions::example()));
    let action = tokio::time::timeout(
        Duration::from_secs(10),
        function::reconcile(Arc::new(f), ctx.clone()),
    )
    .await
    .expect("reconcile hung: a request was not answered")
    .expect("reconcile failed");
    drop(ctx);
    (action, finish(task).await)
}

fn env_of(deployment: &Value) -> Vec<(String, String)> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn new_function_gets_the_finalizer_first() {
    let steps = vec![
        Step::new(
            Method::PATCH,
            format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/functions/hello?"),
        )
        .check(|b| {
            assert_eq!(b[1]["op"], "add");
            assert_eq!(b[1]["value"][0], FINALIZER);
        })
        .answer(
            200,
            serde_json::to_value(function(Scenario::CodeUploaded)).unwrap(),
        ),
    ];
    let (action, out) = run(function(Scenario::New), steps).await;
    out.assert_complete();
    assert_eq!(action, kube::runtime::controller::Action::await_change());
}

#[tokio::test]
async fn first_build_creates_one_kaniko_job_and_records_it() {
    let steps = vec![
        Step::new(
            Method::POST,
            format!("/apis/batch/v1/namespaces/{DNS}/jobs?"),
        )
        .status(201)
        .check(|b| {
            assert_eq!(b["metadata"]["name"], job_name());
            let args = b["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap();
            assert!(args.contains(&json!(format!("--destination={}", image()))));
            assert!(args.contains(&json!(format!("--context=s3://sless-code/{KEY}"))));
            assert_eq!(b["spec"]["backoffLimit"], 0);
            assert_eq!(b["metadata"]["labels"][names::OWNER_NAME], "hello");
        }),
        status_step(|b| {
            assert_eq!(b["status"]["phase"], "Building");
            assert_eq!(b["status"]["build"]["tag"], tag());
            assert_eq!(b["status"]["build"]["state"], "Running");
            assert_eq!(b["status"]["build"]["job"], job_name());
        }),
    ];
    let (action, out) = run(function(Scenario::CodeUploaded), steps).await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["BuildStarted"]);
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_BUILDING)
    );
}

#[tokio::test]
async fn build_job_already_there_after_a_crash_is_not_an_error() {
    // The operator created the Job, then died before recording it: the
    // deterministic name makes the second create a harmless 409.
    let steps = vec![
        Step::new(
            Method::POST,
            format!("/apis/batch/v1/namespaces/{DNS}/jobs?"),
        )
        .answer(
            409,
            status_body(409, "AlreadyExists", "jobs.batch already exists"),
        ),
        status_step(|b| assert_eq!(b["status"]["phase"], "Building")),
    ];
    let (_, out) = run(function(Scenario::CodeUploaded), steps).await;
    out.assert_complete();
}

#[tokio::test]
async fn same_code_key_is_never_built_twice_even_after_a_restart() {
    // A fresh operator sees status.build for this tag: it only looks at the Job.
    let steps = vec![Step::new(Method::GET, job_uri()).answer(200, job("running"))];
    let (action, out) = run(function(Scenario::Building), steps).await;
    out.assert_complete();
    assert!(out.events.is_empty());
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_BUILDING)
    );
}

#[tokio::test]
async fn failed_build_marks_failed_and_waits_for_new_code() {
    let steps = vec![
        Step::new(Method::GET, job_uri()).answer(200, job("failed")),
        status_step(|b| {
            assert_eq!(b["status"]["phase"], "Failed");
            assert_eq!(b["status"]["build"]["state"], "Failed");
            let msg = b["status"]["message"].as_str().unwrap();
            assert!(msg.contains("BackoffLimitExceeded"), "{msg}");
        }),
    ];
    let (action, out) = run(function(Scenario::Building), steps).await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["BuildFailed"]);
    assert_eq!(action, kube::runtime::controller::Action::await_change());

    // Reconciled again (e.g. after a restart): no Job, no write, no loop.
    let (action, out) = run(function(Scenario::BuildFailed), vec![]).await;
    out.assert_complete();
    assert!(out.events.is_empty());
    assert_eq!(action, kube::runtime::controller::Action::await_change());
}

#[tokio::test]
async fn new_code_after_a_failed_build_builds_again() {
    let mut f = function(Scenario::BuildFailed);
    f.spec.code.as_mut().unwrap().key = "code/sless-0123abcd/bbbb.python3.11.tar.gz".into();
    let new_tag = names::image_tag("code/sless-0123abcd/bbbb.python3.11.tar.gz");
    let steps = vec![
        Step::new(
            Method::POST,
            format!("/apis/batch/v1/namespaces/{DNS}/jobs?"),
        )
        .status(201)
        .check(move |b| assert_eq!(b["metadata"]["name"], format!("build-hello-{new_tag}"))),
        status_step(|b| assert_eq!(b["status"]["phase"], "Building")),
    ];
    let (_, out) = run(f, steps).await;
    out.assert_complete();
}

/// The list of the function's pods (by app label), answered with pods
/// whose single container restarted `restarts[i]` times.
fn list_pods(restarts: &[i32]) -> Step {
    let items: Vec<Value> = restarts
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": format!("fn-hello-{i}"), "namespace": DNS,
                                "labels": {names::APP_LABEL: "fn-hello"}},
                   "status": {"containerStatuses": [{"name": "function", "image": image(), "imageID": "",
                                                     "ready": true, "restartCount": n}]}})
        })
        .collect();
    Step::new(
        Method::GET,
        format!("/api/v1/namespaces/{DNS}/pods?&labelSelector=sless.kube5s.ru%2Fapp%3Dfn-hello"),
    )
    .answer(
        200,
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}),
    )
}

/// The Deployment and Service applies and the pod list (no pods);
/// `deployment` is the Deployment answer (`None` echoes the applied body: a
/// Deployment not ready yet).
fn apply_steps(
    deployment: Option<Value>,
    check_deployment: impl Fn(&Value) + Send + 'static,
) -> Vec<Step> {
    let mut d =
        Step::new(Method::PATCH, apply_uri("deployments", "fn-hello")).check(check_deployment);
    if let Some(answer) = deployment {
        d = d.answer(200, answer);
    }
    vec![
        d,
        Step::new(Method::PATCH, apply_uri("services", "fn-hello")).check(|b| {
            assert_eq!(b["spec"]["selector"][names::APP_LABEL], "fn-hello");
            assert_eq!(b["spec"]["ports"][0]["targetPort"], 8080);
        }),
        list_pods(&[]),
    ]
}

/// The status patch, answered with the function (the controller ignores
/// the answer's content).
fn status_step(check: impl Fn(&Value) + Send + 'static) -> Step {
    Step::new(Method::PATCH, status_uri()).check(check).answer(
        200,
        serde_json::to_value(function(Scenario::CodeUploaded)).unwrap(),
    )
}

#[tokio::test]
async fn build_success_applies_deployment_and_service() {
    let mut steps = vec![Step::new(Method::GET, job_uri()).answer(200, job("succeeded"))];
    steps.extend(apply_steps(None, |d| {
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["namespace"], DNS);
        assert!(
            d["metadata"]["ownerReferences"].is_null(),
            "no cross-namespace owner refs"
        );
        assert_eq!(d["metadata"]["labels"][names::OWNER_NAMESPACE], NS);
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], image());
        assert_eq!(c["resources"]["limits"]["memory"], "128Mi");
        assert_eq!(c["readinessProbe"]["tcpSocket"]["port"], 8080);
        let env = env_of(d);
        let mut sorted = env.clone();
        sorted.sort();
        assert_eq!(env, sorted, "env sorted");
        assert!(env.contains(&("SLESS_ENTRYPOINT".into(), "main.handler".into())));
        assert_eq!(
            d["spec"]["template"]["spec"]["imagePullSecrets"][0]["name"],
            "sless-registry"
        );
    }));
    steps.push(status_step(|b| {
        let s = &b["status"];
        assert_eq!(s["build"]["state"], "Succeeded");
        assert_eq!(s["imageRef"], image());
        assert_eq!(s["phase"], "Building");
        assert_eq!(s["message"], "starting");
        assert!(s["lastBuiltAt"].is_string());
    }));
    let (action, out) = run(function(Scenario::Building), steps).await;
    out.assert_complete();
    assert_eq!(out.event_reasons(), ["BuildSucceeded"]);
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_STARTING)
    );
}

#[tokio::test]
async fn ready_function_reconciles_without_builds_or_status_writes() {
    // A restart of a Ready function: no Job request, Deployment and Service
    // re-applied (a no-op server-side), status untouched.
    let steps = apply_steps(Some(ready_deployment(&function(Scenario::Ready))), |_| {});
    let (action, out) = run(function(Scenario::Ready), steps).await;
    out.assert_complete();
    assert!(out.events.is_empty());
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_READY)
    );
}

fn ready_deployment(f: &Function) -> Value {
    deployment_answer(f, 1, 1, 1, 1)
}

/// The Deployment as the API server answers an apply: `replicas` wanted,
/// `available` available, at `generation` with `observed` rolled out.
fn deployment_answer(
    f: &Function,
    replicas: i32,
    available: i32,
    generation: i64,
    observed: i64,
) -> Value {
    let mut d = serde_json::to_value(sless_operator::kube::builders::deployment(
        &KubeOptions::example(),
        &sless_operator::kube::builders::Workload {
            kind: names::OwnerKind::Function,
            namespace: NS,
            name: "hello",
            runtime: sless_wire::Runtime::Python311,
            entrypoint: &f.spec.entrypoint,
            env_vars: &f.spec.env_vars,
            secret_env_vars: &f.spec.secret_env_vars,
            memory_mb: f.spec.memory_mb,
            timeout_sec: f.spec.timeout_sec,
            image: &image(),
        },
        replicas,
    ))
    .unwrap();
    d["metadata"]["generation"] = json!(generation);
    d["status"] = json!({"observedGeneration": observed, "replicas": available,
                         "updatedReplicas": available, "availableReplicas": available,
                         "readyReplicas": available});
    d
}

#[tokio::test]
async fn env_and_memory_update_patches_the_deployment_without_a_rebuild() {
    let mut f = function(Scenario::Ready);
    f.spec.env_vars.insert("NEW".into(), "yes".into());
    f.spec.memory_mb = 512;
    f.spec.entrypoint = "other.handler".into();
    let answer = ready_deployment(&f);
    let steps = vec![
        Step::new(Method::PATCH, apply_uri("deployments", "fn-hello"))
            .check(|d| {
                let c = &d["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["resources"]["limits"]["memory"], "512Mi");
                assert_eq!(c["image"], image(), "same image: no rebuild");
                let env = env_of(d);
                assert!(env.contains(&("NEW".into(), "yes".into())));
                assert!(env.contains(&("SLESS_ENTRYPOINT".into(), "other.handler".into())));
                assert!(env.contains(&("SLESS_MEMORY_MB".into(), "512".into())));
            })
            .answer(200, answer),
        Step::new(Method::PATCH, apply_uri("services", "fn-hello")),
        list_pods(&[]),
    ];
    let (_, out) = run(f, steps).await;
    out.assert_complete();
}

#[tokio::test]
async fn container_restarts_of_the_pods_are_recorded_in_the_status() {
    // A crash restarts the container: the pod turns unready and back, the
    // watched Deployment changes, and the reconcile reads the pods.
    let mut steps = apply_steps(Some(ready_deployment(&function(Scenario::Ready))), |_| {});
    steps.pop();
    steps.push(list_pods(&[2, 1]));
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["restarts"], 3);
        assert_eq!(b["status"]["phase"], "Ready");
    }));
    let (action, out) = run(function(Scenario::Ready), steps).await;
    out.assert_complete();
    assert!(out.events.is_empty(), "still Ready: no event");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_READY)
    );

    // Recorded already: no status write.
    let mut f = function(Scenario::Ready);
    f.status.as_mut().unwrap().restarts = 3;
    let mut steps = apply_steps(Some(ready_deployment(&f)), |_| {});
    steps.pop();
    steps.push(list_pods(&[2, 1]));
    let (_, out) = run(f, steps).await;
    out.assert_complete();
}

#[tokio::test]
async fn deployment_deleted_by_hand_is_recreated() {
    // The Deployment watch fires on its deletion; reconcile applies it again
    // (201 Created) and reports the function as starting until it is ready.
    let steps = vec![
        Step::new(Method::PATCH, apply_uri("deployments", "fn-hello"))
            .status(201)
            .check(|d| assert_eq!(d["metadata"]["name"], "fn-hello")),
        Step::new(Method::PATCH, apply_uri("services", "fn-hello")),
        list_pods(&[]),
        status_step(|b| {
            assert_eq!(b["status"]["phase"], "Building");
            assert_eq!(b["status"]["message"], "starting");
        }),
    ];
    let (action, out) = run(function(Scenario::Ready), steps).await;
    out.assert_complete();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_STARTING)
    );
}

fn cleanup_steps() -> Vec<Step> {
    let selector = "app.kubernetes.io%2Fmanaged-by%3Dsless-operator%2Csless.kube5s.ru%2Fowner-kind%3DFunction%2Csless.kube5s.ru%2Fowner-name%3Dhello%2Csless.kube5s.ru%2Fowner-namespace%3Dsless-0123abcd";
    vec![
        Step::new(
            Method::DELETE,
            format!("/apis/batch/v1/namespaces/{DNS}/jobs?&labelSelector={selector}"),
        )
        .check(|b| assert_eq!(b["propagationPolicy"], "Background"))
        .answer(
            200,
            json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []}),
        ),
        Step::new(
            Method::DELETE,
            format!("/apis/apps/v1/namespaces/{DNS}/deployments/fn-hello?"),
        )
        .answer(
            404,
            status_body(404, "NotFound", "deployments.apps \"fn-hello\" not found"),
        ),
        Step::new(
            Method::DELETE,
            format!("/api/v1/namespaces/{DNS}/services/fn-hello?"),
        )
        .answer(
            404,
            status_body(404, "NotFound", "services \"fn-hello\" not found"),
        ),
        Step::new(
            Method::PATCH,
            format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/functions/hello?"),
        )
        .check(|b| {
            assert_eq!(b[0]["op"], "test");
            assert_eq!(b[1]["op"], "remove");
        })
        .answer(
            200,
            serde_json::to_value(function(Scenario::Deleting { building: true })).unwrap(),
        ),
    ]
}

#[tokio::test]
async fn delete_while_building_deletes_the_build_job_and_creates_nothing() {
    let (action, out) = run(
        function(Scenario::Deleting { building: true }),
        cleanup_steps(),
    )
    .await;
    out.assert_complete();
    assert!(
        !out.seen
            .iter()
            .any(|s| s.starts_with("POST") || s.contains("force=true")),
        "nothing applied: {:?}",
        out.seen
    );
    assert_eq!(action, kube::runtime::controller::Action::await_change());
}

#[tokio::test]
async fn delete_tolerates_an_apply_that_never_ran() {
    let (_, out) = run(
        function(Scenario::Deleting { building: false }),
        cleanup_steps(),
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn function_without_code_is_pending() {
    let mut f = function(Scenario::CodeUploaded);
    f.spec.code = None;
    let steps = vec![status_step(|b| {
        assert_eq!(b["status"]["phase"], "Pending");
    })];
    let (action, out) = run(f, steps).await;
    out.assert_complete();
    assert_eq!(action, kube::runtime::controller::Action::await_change());
}

/// The harness itself: a request the script does not expect fails the test.
#[tokio::test]
#[should_panic(expected = "mock API server")]
async fn an_unexpected_request_fails_the_test() {
    // A first build makes a POST and a status PATCH; scripting only the
    // status PATCH must fail.
    let (client, task) = start(vec![status_step(|_| {})]);
    let ctx = Arc::new(Ctx::new(client, KubeOptions::example()));
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        function::reconcile(Arc::new(function(Scenario::CodeUploaded)), ctx.clone()),
    )
    .await;
    drop(ctx);
    finish(task).await.assert_complete();
}

/// The harness itself: a failing body check fails the test.
#[tokio::test]
#[should_panic]
async fn a_failing_body_check_fails_the_test() {
    let steps = vec![
        Step::new(
            Method::POST,
            format!("/apis/batch/v1/namespaces/{DNS}/jobs?"),
        )
        .status(201)
        .check(|b| assert_eq!(b["spec"]["backoffLimit"], 3)),
        status_step(|_| {}),
    ];
    run(function(Scenario::CodeUploaded), steps).await;
}

// Scale to zero.

/// Seconds of a requeue action (`Action` has no getter; its Debug form
/// prints the duration).
fn requeue_secs(a: &kube::runtime::controller::Action) -> f64 {
    let d = format!("{a:?}");
    let inner = d
        .split("Some(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("no requeue in {d}"));
    let (num, factor) = if let Some(ms) = inner.strip_suffix("ms") {
        (ms, 0.001)
    } else {
        (inner.trim_end_matches('s'), 1.0)
    };
    num.parse::<f64>().unwrap_or_else(|_| panic!("{d}")) * factor
}

fn rfc3339(ago: Duration) -> String {
    (k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::try_from(ago).unwrap())
    .to_string()
}

/// A Ready function that became Ready `ready_ago` and was last called
/// `called_ago` (`None`: never), with `instances` serving.
fn ready_function(ready_ago: Duration, called_ago: Option<Duration>, instances: u32) -> Function {
    let mut f = function(Scenario::Ready);
    let st = f.status.as_mut().unwrap();
    st.instances = instances;
    let ready = st
        .conditions
        .iter_mut()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    ready.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now()
            - k8s_openapi::jiff::SignedDuration::try_from(ready_ago).unwrap(),
    );
    if let Some(ago) = called_ago {
        f.metadata.annotations = Some(BTreeMap::from([(
            sless_operator::kube::scale::LAST_REQUEST.to_string(),
            rfc3339(ago),
        )]));
    }
    f
}

fn replicas_of(d: &Value) -> i64 {
    d["spec"]["replicas"].as_i64().expect("spec.replicas")
}

fn ready_reason(b: &Value) -> String {
    b["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| {
            format!(
                "{}/{}",
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
        .unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_function_idle_past_its_timeout_is_scaled_to_zero_and_stays_ready() {
    // Ready for an hour, last called 301 s ago, idle timeout 300 s.
    let f = ready_function(HOUR, Some(Duration::from_secs(301)), 1);
    // The API server answers with the scale-down under way: generation
    // bumped, not observed yet, the old pod still counted.
    let answer = deployment_answer(&f, 0, 1, 2, 1);
    let mut steps = apply_steps(Some(answer), |d| assert_eq!(replicas_of(d), 0));
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["phase"], "Ready", "at zero it stays Ready");
        assert!(b["status"]["message"].is_null());
        assert!(b["status"]["instances"].is_null(), "0 instances: {b}");
        assert_eq!(ready_reason(b), "True/ScaledToZero");
    }));
    let (action, out) = run(f, steps).await;
    out.assert_complete();
    assert!(out.events.is_empty(), "still Ready: no event");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_READY)
    );
}

#[tokio::test]
async fn a_function_never_called_is_scaled_down_an_idle_timeout_after_it_became_ready() {
    let f = ready_function(Duration::from_secs(400), None, 1);
    let mut steps = apply_steps(Some(deployment_answer(&f, 0, 0, 2, 2)), |d| {
        assert_eq!(replicas_of(d), 0)
    });
    steps.push(status_step(|b| assert_eq!(b["status"]["phase"], "Ready")));
    let (_, out) = run(f, steps).await;
    out.assert_complete();

    // Ready only 250 s ago: it keeps its replica and looks again when idle
    // (before the 60 s periodic requeue).
    let f = ready_function(Duration::from_secs(250), None, 1);
    let steps = apply_steps(Some(ready_deployment(&f)), |d| {
        assert_eq!(replicas_of(d), 1)
    });
    let (action, out) = run(f, steps).await;
    out.assert_complete();
    let secs = requeue_secs(&action);
    assert!((48.0..=50.0).contains(&secs), "requeue in {secs} s");
}

#[tokio::test]
async fn a_recently_called_function_keeps_its_replica_and_requeues_when_it_becomes_idle() {
    let f = ready_function(HOUR, Some(Duration::from_secs(280)), 1);
    // Unchanged: no status write.
    let steps = apply_steps(Some(ready_deployment(&f)), |d| {
        assert_eq!(replicas_of(d), 1)
    });
    let (action, out) = run(f, steps).await;
    out.assert_complete();
    let secs = requeue_secs(&action);
    assert!(
        (18.0..=20.0).contains(&secs),
        "idle in 20 s, requeue in {secs} s"
    );
}

#[tokio::test]
async fn min_instances_1_is_never_scaled_to_zero() {
    let mut f = ready_function(HOUR, Some(HOUR), 1);
    f.spec.min_instances = 1;
    let steps = apply_steps(Some(ready_deployment(&f)), |d| {
        assert_eq!(replicas_of(d), 1)
    });
    let (action, out) = run(f, steps).await;
    out.assert_complete();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_READY)
    );
    // Also when it never was called at all.
    let mut f = ready_function(HOUR, None, 1);
    f.spec.min_instances = 1;
    let steps = apply_steps(Some(ready_deployment(&f)), |d| {
        assert_eq!(replicas_of(d), 1)
    });
    let (_, out) = run(f, steps).await;
    out.assert_complete();
}

#[tokio::test]
async fn a_request_for_a_function_at_zero_scales_it_up_and_it_stays_ready() {
    // At zero, then the proxy recorded a request just now.
    let mut f = ready_function(HOUR, Some(Duration::from_secs(1)), 0);
    function::set_condition(
        &mut f.status.as_mut().unwrap().conditions,
        "Ready",
        true,
        "ScaledToZero",
        "scaled to zero; the next request starts it",
    );
    // The pod is starting: nothing available yet.
    let answer = deployment_answer(&f, 1, 0, 3, 2);
    let mut steps = apply_steps(Some(answer), |d| assert_eq!(replicas_of(d), 1));
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["phase"], "Ready", "waking is not a rollout");
        assert!(b["status"]["instances"].is_null());
        assert_eq!(ready_reason(b), "True/ScalingUp");
    }));
    let (action, out) = run(f.clone(), steps).await;
    out.assert_complete();
    assert!(out.events.is_empty());
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_STARTING)
    );

    // The pod became available: one instance.
    let mut steps = apply_steps(Some(deployment_answer(&f, 1, 1, 3, 3)), |d| {
        assert_eq!(replicas_of(d), 1)
    });
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["instances"], 1);
        assert_eq!(ready_reason(b), "True/Available");
    }));
    let (_, out) = run(f, steps).await;
    out.assert_complete();
}

#[tokio::test]
async fn an_unreadable_or_far_future_annotation_does_not_keep_a_function_up() {
    for value in ["not a time", "2999-01-01T00:00:00Z"] {
        let mut f = ready_function(HOUR, None, 1);
        f.metadata.annotations = Some(BTreeMap::from([(
            sless_operator::kube::scale::LAST_REQUEST.to_string(),
            value.to_string(),
        )]));
        let mut steps = apply_steps(Some(deployment_answer(&f, 0, 0, 2, 2)), |d| {
            assert_eq!(replicas_of(d), 0)
        });
        steps.push(status_step(|_| {}));
        let (_, out) = run(f, steps).await;
        out.assert_complete();
    }
}

#[tokio::test]
async fn a_function_not_ready_yet_rolls_out_one_replica_whatever_its_activity() {
    // A new build of a function that was idle for long: it runs one
    // replica until it is Ready again.
    let mut f = ready_function(HOUR, Some(HOUR), 0);
    f.status.as_mut().unwrap().phase = Some("Building".into());
    let mut steps = apply_steps(None, |d| assert_eq!(replicas_of(d), 1));
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["phase"], "Building");
        assert_eq!(b["status"]["message"], "starting");
    }));
    let (action, out) = run(f, steps).await;
    out.assert_complete();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(function::REQUEUE_STARTING)
    );
}
