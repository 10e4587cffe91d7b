//! Reconcile tests of the sless Service controller against a scripted API
//! server: deploy after the build, in-place updates, self-healing, container
//! restarts in the status, cleanup.

mod kube_mock;

use http::Method;
use kube::runtime::controller::Action;
use kube_mock::{Step, finish, start, status_body};
use serde_json::{Value, json};
use sless_operator::kube::KubeOptions;
use sless_operator::kube::crd::{
    BuildState, BuildStatus, CodeRef, SlessService, SlessServiceSpec, SlessServiceStatus,
};
use sless_operator::kube::function::Ctx;
use sless_operator::kube::names;
use sless_operator::kube::service::{self, FINALIZER};
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "sless-0123abcd";
const DNS: &str = "sless-fn-sless-0123abcd";
const KEY: &str = "code/sless-0123abcd/dddd.python3.11.tar.gz";
const APPLY: &str = "?&force=true&fieldManager=sless-operator";

fn svc(ready: bool) -> SlessService {
    let mut s = SlessService::new(
        "api",
        SlessServiceSpec {
            runtime: "python3.11".into(),
            entrypoint: Some("app.py".into()),
            command: vec![],
            env_vars: [("MODE".to_string(), "prod".to_string())].into(),
            secret_env_vars: Default::default(),
            memory_mb: 256,
            timeout_sec: 30,
            health_path: "/healthz".into(),
            code: Some(CodeRef {
                key: KEY.into(),
                sha256: "dddd".into(),
                source_hash: None,
            }),
        },
    );
    s.metadata.namespace = Some(NS.into());
    s.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let mut st = SlessServiceStatus {
        phase: Some(if ready { "Ready" } else { "Building" }.into()),
        message: (!ready).then(|| "starting".to_string()),
        build: Some(BuildStatus {
            tag: names::image_tag(KEY),
            job: format!("build-svc-api-{}", names::image_tag(KEY)),
            state: BuildState::Succeeded,
        }),
        url: Some(format!("http://svc-api.{DNS}.svc.cluster.local")),
        ..Default::default()
    };
    if ready {
        sless_operator::kube::function::set_condition(
            &mut st.conditions,
            "Ready",
            true,
            "Available",
            "the Deployment is available",
        );
    } else {
        sless_operator::kube::function::set_condition(
            &mut st.conditions,
            "Ready",
            false,
            "Starting",
            "waiting for the Deployment",
        );
    }
    s.status = Some(st);
    s
}

fn ready(body: &Value) -> Value {
    let mut d = body.clone();
    d["metadata"]["generation"] = json!(1);
    d["status"] = json!({"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1});
    d
}

fn status_step(check: impl Fn(&Value) + Send + 'static) -> Step {
    Step::new(
        Method::PATCH,
        format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/services/api/status{APPLY}"),
    )
    .check(check)
    .answer(200, serde_json::to_value(svc(false)).unwrap())
}

async fn run(s: SlessService, steps: Vec<Step>) -> (Action, kube_mock::Outcome) {
    let (client, task) = start(steps);
    let ctx = Arc::new(Ctx::new(client, KubeOptions::example()));
    let action = tokio::time::timeout(
        Duration::from_secs(10),
        service::reconcile(Arc::new(s), ctx.clone()),
    )
    .await
    .expect("reconcile hung")
    .expect("reconcile failed");
    drop(ctx);
    (action, finish(task).await)
}

fn deployment_for(s: &SlessService) -> Value {
    let w = sless_operator::kube::builders::Workload {
        kind: names::OwnerKind::Service,
        namespace: NS,
        name: "api",
        runtime: sless_wire::Runtime::Python311,
        entrypoint: s.spec.entrypoint.as_deref().unwrap_or(""),
        env_vars: &s.spec.env_vars,
        secret_env_vars: &s.spec.secret_env_vars,
        memory_mb: s.spec.memory_mb,
        timeout_sec: s.spec.timeout_sec,
        image: &format!("registry.test/{NS}/api:{}", names::image_tag(KEY)),
    };
    serde_json::to_value(sless_operator::kube::builders::service_deployment(
        &KubeOptions::example(),
        &w,
        &s.spec.command,
        &s.spec.health_path,
    ))
    .unwrap()
}

/// The list of the service's pods (by app label), answered with pods whose
/// single container restarted `restarts[i]` times.
fn list_pods(restarts: &[i32]) -> Step {
    let items: Vec<Value> = restarts
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": format!("svc-api-{i}"), "namespace": DNS,
                                "labels": {names::APP_LABEL: "svc-api"}},
                   "status": {"containerStatuses": [{"name": "service", "image": "i", "imageID": "",
                                                     "ready": true, "restartCount": n}]}})
        })
        .collect();
    Step::new(
        Method::GET,
        format!("/api/v1/namespaces/{DNS}/pods?&labelSelector=sless.kube5s.ru%2Fapp%3Dsvc-api"),
    )
    .answer(
        200,
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}),
    )
}

/// The Deployment apply (answered with an available Deployment), the
/// Service apply and the pod list of a Ready service's reconcile.
fn ready_steps(s: &SlessService, pods: Step) -> Vec<Step> {
    vec![
        Step::new(
            Method::PATCH,
            format!("/apis/apps/v1/namespaces/{DNS}/deployments/svc-api{APPLY}"),
        )
        .answer(200, ready(&deployment_for(s))),
        Step::new(
            Method::PATCH,
            format!("/api/v1/namespaces/{DNS}/services/svc-api{APPLY}"),
        ),
        pods,
    ]
}

#[tokio::test]
async fn a_built_service_self_heals_when_its_deployment_was_deleted() {
    // The Deployment watch fired on a hand delete: apply recreates it (201),
    // the service reports starting until it is available again.
    let (action, out) = run(
        svc(true),
        vec![
            Step::new(
                Method::PATCH,
                format!("/apis/apps/v1/namespaces/{DNS}/deployments/svc-api{APPLY}"),
            )
            .status(201)
            .check(|d| {
                let c = &d["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["command"], json!(["python3", "-u", "app.py"]));
                assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
                assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
                let env: Vec<&str> = c["env"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["name"].as_str().unwrap())
                    .collect();
                assert_eq!(env, ["MODE", "PORT"]);
                assert_eq!(
                    d["metadata"]["labels"]["sless.kube5s.ru/owner-kind"],
                    "Service"
                );
            }),
            Step::new(
                Method::PATCH,
                format!("/api/v1/namespaces/{DNS}/services/svc-api{APPLY}"),
            ),
            list_pods(&[]),
            status_step(|b| {
                assert_eq!(b["status"]["phase"], "Building");
                assert_eq!(b["status"]["message"], "starting");
            }),
        ],
    )
    .await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(service::REQUEUE_ACTIVE));
}

#[tokio::test]
async fn memory_and_env_change_update_the_deployment_in_place() {
    let mut s = svc(true);
    s.spec.memory_mb = 512;
    s.spec.env_vars.insert("EXTRA".into(), "1".into());
    let answer = ready(&deployment_for(&s));
    let (action, out) = run(
        s,
        vec![
            Step::new(
                Method::PATCH,
                format!("/apis/apps/v1/namespaces/{DNS}/deployments/svc-api{APPLY}"),
            )
            .check(|d| {
                let c = &d["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["resources"]["limits"]["memory"], "512Mi");
                assert_eq!(
                    c["image"],
                    format!("registry.test/{NS}/api:{}", names::image_tag(KEY))
                );
                assert!(
                    c["env"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|e| e["name"] == "EXTRA")
                );
            })
            .answer(200, answer),
            Step::new(
                Method::PATCH,
                format!("/api/v1/namespaces/{DNS}/services/svc-api{APPLY}"),
            ),
            list_pods(&[]),
        ],
    )
    .await;
    out.assert_complete();
    assert!(out.events.is_empty());
    assert_eq!(action, Action::requeue(service::REQUEUE_READY));
}

#[tokio::test]
async fn container_restarts_of_the_pods_are_recorded_in_the_status() {
    // A crash restarts the container: the pod turns unready and back, the
    // watched Deployment changes, and the reconcile reads the pods.
    let s = svc(true);
    let mut steps = ready_steps(&s, list_pods(&[2, 1]));
    steps.push(status_step(|b| {
        assert_eq!(b["status"]["restarts"], 3);
        assert_eq!(b["status"]["phase"], "Ready");
    }));
    let (action, out) = run(s, steps).await;
    out.assert_complete();
    assert!(out.events.is_empty(), "still Ready: no event");
    assert_eq!(action, Action::requeue(service::REQUEUE_READY));

    // Recorded already: no status write.
    let mut s = svc(true);
    s.status.as_mut().unwrap().restarts = 3;
    let steps = ready_steps(&s, list_pods(&[2, 1]));
    let (_, out) = run(s, steps).await;
    out.assert_complete();

    // The count is informational: a failed pod list keeps the recorded value
    // and does not fail the reconcile.
    let mut s = svc(true);
    s.status.as_mut().unwrap().restarts = 3;
    let pods = Step::new(
        Method::GET,
        format!("/api/v1/namespaces/{DNS}/pods?&labelSelector=sless.kube5s.ru%2Fapp%3Dsvc-api"),
    )
    .answer(500, status_body(500, "InternalError", "etcd is sad"));
    let steps = ready_steps(&s, pods);
    let (action, out) = run(s, steps).await;
    out.assert_complete();
    assert_eq!(action, Action::requeue(service::REQUEUE_READY));
}

#[tokio::test]
async fn deleting_a_service_removes_build_jobs_deployment_and_service() {
    let mut s = svc(true);
    s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let selector = "app.kubernetes.io%2Fmanaged-by%3Dsless-operator%2Csless.kube5s.ru%2Fowner-kind%3DService%2Csless.kube5s.ru%2Fowner-name%3Dapi%2Csless.kube5s.ru%2Fowner-namespace%3Dsless-0123abcd";
    let (_, out) = run(
        s.clone(),
        vec![
            Step::new(
                Method::DELETE,
                format!("/apis/batch/v1/namespaces/{DNS}/jobs?&labelSelector={selector}"),
            )
            .answer(
                200,
                json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []}),
            ),
            Step::new(
                Method::DELETE,
                format!("/apis/apps/v1/namespaces/{DNS}/deployments/svc-api?"),
            ),
            Step::new(
                Method::DELETE,
                format!("/api/v1/namespaces/{DNS}/services/svc-api?"),
            )
            .answer(404, status_body(404, "NotFound", "gone")),
            Step::new(
                Method::PATCH,
                format!("/apis/sless.kube5s.ru/v1alpha1/namespaces/{NS}/services/api?"),
            )
            .check(|b| assert_eq!(b[1]["op"], "remove"))
            .answer(200, serde_json::to_value(&s).unwrap()),
        ],
    )
    .await;
    out.assert_complete();
}
