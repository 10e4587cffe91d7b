//! The REST API over the Kubernetes backend, wired to a scripted API server:
//! the requests the backend makes for each call, and how API-server errors
//! reach the client ("invalid" → 400, "already exists" → 409, not found →
//! 404; never a 500 for input).

mod kube_mock;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use kube_mock::{Step, finish, start, status_body};
use object_store::memory::InMemory;
use serde_json::{Value, json};
use sless_operator::api::{AppState, router, upstream};
use sless_operator::auth::{LocalKey, Verifier};
use sless_operator::backend::Backend;
use sless_operator::config::AuthArgs;
use sless_operator::kube::objstore::CodeStore;
use sless_operator::kube::{KubeBackend, KubeOptions};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

const SUB: &str = "alice@example.com";

fn ns() -> String {
    sless_wire::namespace_for_sub(SUB)
}

fn fn_uri(rest: &str) -> String {
    format!(
        "/apis/sless.kube5s.ru/v1alpha1/namespaces/{}/functions{rest}",
        ns()
    )
}

fn function_json(name: &str, phase: Option<&str>) -> Value {
    let mut f = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
        "metadata": {"name": name, "namespace": ns(), "resourceVersion": "5",
                     "creationTimestamp": "2026-12-02T10:00:00Z",
                     "annotations": {"sless.kube5s.ru/updated-at": "2026-12-02T10:00:05Z"}},
        "spec": {"runtime": "python3.11", "entrypoint": "main.handler",
                 "envVars": {"A": "1"}, "memoryMb": 256, "timeoutSec": 30,
                 "code": {"key": "code/x/aaaa.python3.11.tar.gz", "sha256": "aaaa"}},
    });
    if let Some(p) = phase {
        f["status"] = json!({"phase": p, "imageRef": "registry.test/x/y:0123456789ab"});
    }
    f
}

struct Rest {
    app: axum::Router,
    token: String,
    _dir: tempfile::TempDir,
}

async fn rest(client: kube::Client) -> Rest {
    let dir = tempfile::tempdir().unwrap();
    let auth = Verifier::from_args(&AuthArgs::default(), dir.path())
        .await
        .unwrap();
    let token = LocalKey::load_or_create(dir.path())
        .unwrap()
        .mint(SUB, Duration::from_secs(600))
        .unwrap();
    let backend = KubeBackend::new(
        client,
        KubeOptions::example(),
        CodeStore::new(Arc::new(InMemory::new())),
    );
    let state = AppState {
        backend: Arc::new(backend),
        auth: Arc::new(auth),
        proxy: upstream::Upstream::tcp(),
        public_url: "http://operator.test".into(),
    };
    Rest {
        app: router(state),
        token,
        _dir: dir,
    }
}

impl Rest {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.token));
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Body::from(serde_json::to_vec(&b).unwrap())
            }
            None => Body::empty(),
        };
        let resp = self
            .app
            .clone()
            .oneshot(req.body(body).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

async fn scenario(steps: Vec<Step>, f: impl AsyncFnOnce(&Rest)) -> kube_mock::Outcome {
    let (client, task) = start(steps);
    let r = rest(client).await;
    tokio::time::timeout(Duration::from_secs(10), f(&r))
        .await
        .expect("request hung");
    drop(r);
    finish(task).await
}

/// What `ensure_namespace` does the first time: the user and deploy
/// namespaces, the NetworkPolicy, the registry and object-store secrets
/// copied from the operator's namespace. Later calls only check the
/// namespace exists.
fn ensure_steps(first: bool) -> Vec<Step> {
    let n = ns();
    let d = format!("sless-fn-{n}");
    let apply = "?&force=true&fieldManager=sless-operator";
    if !first {
        return vec![
            Step::new(Method::GET, format!("/api/v1/namespaces/{n}")).answer(
                200,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}),
            ),
        ];
    }
    let secret = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "sless-system"},
               "type": "Opaque", "data": {"k": "dg=="}})
    };
    let nn = n.clone();
    vec![
        Step::new(Method::GET, format!("/api/v1/namespaces/{n}"))
            .answer(404, status_body(404, "NotFound", "namespaces not found")),
        Step::new(Method::PATCH, format!("/api/v1/namespaces/{n}{apply}")),
        Step::new(Method::PATCH, format!("/api/v1/namespaces/{d}{apply}")).check(move |b| {
            assert_eq!(b["metadata"]["labels"]["sless.kube5s.ru/owner-namespace"], nn);
        }),
        Step::new(Method::PATCH, format!("/apis/networking.k8s.io/v1/namespaces/{d}/networkpolicies/sless-default-deny{apply}"))
            .check(|b| assert_eq!(b["spec"]["policyTypes"][0], "Ingress")),
        Step::new(Method::GET, "/api/v1/namespaces/sless-system/secrets/regcred").answer(200, secret("regcred")),
        Step::new(Method::PATCH, format!("/api/v1/namespaces/{d}/secrets/sless-registry{apply}"))
            .check(|b| assert_eq!(b["data"]["k"], "dg==")),
        Step::new(Method::GET, "/api/v1/namespaces/sless-system/secrets/sless-s3").answer(200, secret("sless-s3")),
        Step::new(Method::PATCH, format!("/api/v1/namespaces/{d}/secrets/sless-object-store{apply}")),
    ]
}

fn create_body() -> Value {
    json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler", "env_vars": {"B": "2"}, "memory_mb": 256})
}

#[tokio::test]
async fn create_writes_a_function_resource_in_the_user_namespace() {
    let mut steps = ensure_steps(true);
    steps.push(Step::new(Method::POST, fn_uri("?")).status(201).check(|b| {
        assert_eq!(b["kind"], "Function");
        assert_eq!(b["metadata"]["name"], "hello");
        assert_eq!(b["spec"]["runtime"], "python3.11");
        assert_eq!(b["spec"]["memoryMb"], 256);
        assert_eq!(b["spec"]["timeoutSec"], 30);
        assert_eq!(b["spec"]["envVars"]["B"], "2");
        assert!(b["spec"]["code"].is_null());
    }));
    let out = scenario(steps, async |r| {
        let (status, body) = r
            .call(
                Method::POST,
                &sless_wire::paths::functions(&ns()),
                Some(create_body()),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["name"], "hello");
        assert_eq!(body["status"]["phase"], "Pending");
        assert_eq!(body["spec"]["memory_mb"], 256);
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn already_exists_is_409_and_invalid_is_400_never_500() {
    let mut steps = ensure_steps(true);
    steps.extend([Step::new(Method::POST, fn_uri("?")).answer(
        409,
        status_body(
            409,
            "AlreadyExists",
            "functions.sless.kube5s.ru \"hello\" already exists",
        ),
    )]);
    steps.extend(ensure_steps(false));
    steps.extend([Step::new(Method::POST, fn_uri("?")).answer(
        422,
        status_body(
            422,
            "Invalid",
            "Function.sless.kube5s.ru \"hello\" is invalid: spec.memoryMb: Invalid value",
        ),
    )]);
    steps.extend(ensure_steps(false));
    steps.push(Step::new(Method::POST, fn_uri("?")).answer(
        404,
        status_body(404, "NotFound", "namespaces \"x\" not found"),
    ));
    let out = scenario(steps, async |r| {
        let path = sless_wire::paths::functions(&ns());
        let (status, body) = r.call(Method::POST, &path, Some(create_body())).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert_eq!(body["error"]["code"], "already_exists");
        let (status, body) = r.call(Method::POST, &path, Some(create_body())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("memoryMb"),
            "{body}"
        );
        let (status, body) = r.call(Method::POST, &path, Some(create_body())).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("namespace"),
            "{body}"
        );
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn get_list_and_missing_function() {
    let out = scenario(
        vec![
            Step::new(Method::GET, fn_uri("/hello")).answer(200, function_json("hello", Some("Ready"))),
            Step::new(Method::GET, fn_uri("/nope"))
                .answer(404, status_body(404, "NotFound", "functions.sless.kube5s.ru \"nope\" not found")),
            Step::new(Method::GET, fn_uri("?")).answer(
                200,
                json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "FunctionList", "metadata": {},
                       "items": [function_json("zeta", None), function_json("alpha", Some("Building"))]}),
            ),
        ],
        async |r| {
            let (status, body) = r.call(Method::GET, &sless_wire::paths::function(&ns(), "hello"), None).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["status"]["phase"], "Ready");
            assert_eq!(body["status"]["code_sha256"], "aaaa");
            assert_eq!(body["status"]["image_ref"], "registry.test/x/y:0123456789ab");
            assert_eq!(body["created_at"], "2026-12-02T10:00:00Z");
            assert_eq!(body["updated_at"], "2026-12-02T10:00:05Z");
            let (status, body) = r.call(Method::GET, &sless_wire::paths::function(&ns(), "nope"), None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
            let (status, body) = r.call(Method::GET, &sless_wire::paths::functions(&ns()), None).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let names: Vec<&str> = body["items"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
            assert_eq!(names, ["alpha", "zeta"], "sorted by name");
        },
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn partial_update_keeps_other_fields_and_the_code() {
    let out = scenario(
        vec![
            Step::new(Method::GET, fn_uri("/hello"))
                .answer(200, function_json("hello", Some("Ready"))),
            Step::new(Method::GET, fn_uri("/hello"))
                .answer(200, function_json("hello", Some("Ready"))),
            Step::new(Method::PUT, fn_uri("/hello?")).check(|b| {
                assert_eq!(
                    b["metadata"]["resourceVersion"], "5",
                    "optimistic concurrency"
                );
                assert_eq!(b["spec"]["memoryMb"], 512);
                assert_eq!(b["spec"]["envVars"]["A"], "1", "absent env_vars kept");
                assert_eq!(b["spec"]["entrypoint"], "main.handler");
                assert_eq!(
                    b["spec"]["code"]["key"], "code/x/aaaa.python3.11.tar.gz",
                    "no rebuild"
                );
            }),
        ],
        async |r| {
            let (status, body) = r
                .call(
                    Method::PATCH,
                    &sless_wire::paths::function(&ns(), "hello"),
                    Some(json!({"memory_mb": 512})),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["spec"]["memory_mb"], 512);
            assert_eq!(body["spec"]["env_vars"]["A"], "1");
        },
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn bad_update_is_400_before_touching_the_resource() {
    let out = scenario(
        vec![
            Step::new(Method::GET, fn_uri("/hello"))
                .answer(200, function_json("hello", Some("Ready"))),
        ],
        async |r| {
            let (status, body) = r
                .call(
                    Method::PATCH,
                    &sless_wire::paths::function(&ns(), "hello"),
                    Some(json!({"memory_mb": 1})),
                )
                .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(body["error"]["field"], "memory_mb");
        },
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn update_conflict_is_retried_with_a_fresh_read() {
    let out = scenario(
        vec![
            Step::new(Method::GET, fn_uri("/hello")).answer(200, function_json("hello", None)),
            Step::new(Method::GET, fn_uri("/hello")).answer(200, function_json("hello", None)),
            Step::new(Method::PUT, fn_uri("/hello?")).answer(
                409,
                status_body(409, "Conflict", "the object has been modified"),
            ),
            Step::new(Method::GET, fn_uri("/hello")).answer(200, function_json("hello", None)),
            Step::new(Method::PUT, fn_uri("/hello?"))
                .check(|b| assert_eq!(b["spec"]["timeoutSec"], 60)),
        ],
        async |r| {
            let (status, body) = r
                .call(
                    Method::PATCH,
                    &sless_wire::paths::function(&ns(), "hello"),
                    Some(json!({"timeout_sec": 60})),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
        },
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn delete_deletes_the_resource_and_missing_is_404() {
    let out = scenario(
        vec![
            Step::new(Method::DELETE, fn_uri("/hello?"))
                .check(|b| assert_eq!(b["propagationPolicy"], "Background"))
                .answer(200, function_json("hello", Some("Ready"))),
            Step::new(Method::DELETE, fn_uri("/gone?")).answer(
                404,
                status_body(
                    404,
                    "NotFound",
                    "functions.sless.kube5s.ru \"gone\" not found",
                ),
            ),
        ],
        async |r| {
            let (status, _) = r
                .call(
                    Method::DELETE,
                    &sless_wire::paths::function(&ns(), "hello"),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::NO_CONTENT);
            let (status, _) = r
                .call(
                    Method::DELETE,
                    &sless_wire::paths::function(&ns(), "gone"),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND);
        },
    )
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn function_being_deleted_reads_as_deleting_and_is_not_invoked() {
    let mut deleting = function_json("hello", Some("Ready"));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-12-02T11:00:00Z");
    deleting["metadata"]["finalizers"] = json!(["sless.kube5s.ru/function-cleanup"]);
    let out = scenario(
        vec![
            Step::new(Method::GET, fn_uri("/hello")).answer(200, deleting.clone()),
            Step::new(Method::GET, fn_uri("/hello")).answer(200, deleting),
        ],
        async |r| {
            let (status, body) = r
                .call(
                    Method::GET,
                    &sless_wire::paths::function(&ns(), "hello"),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body["status"]["phase"], "Deleting");
            let (status, _) = r
                .call(
                    Method::POST,
                    &sless_wire::paths::function_invoke(&ns(), "hello"),
                    Some(json!({})),
                )
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND);
        },
    )
    .await;
    out.assert_complete();
}

/// A Ready function that always runs (`minInstances: 1`).
fn always_on(name: &str) -> Value {
    let mut f = function_json(name, Some("Ready"));
    f["spec"]["minInstances"] = json!(1);
    f["status"]["instances"] = json!(1);
    f
}

#[tokio::test]
async fn invoke_target_is_the_in_cluster_service_once_ready() {
    // Always on: no activity is recorded, no lease.
    let (client, task) = start(vec![
        Step::new(Method::GET, fn_uri("/hello")).answer(200, always_on("hello")),
        Step::new(Method::GET, fn_uri("/hello"))
            .answer(200, function_json("hello", Some("Building"))),
    ]);
    let b = KubeBackend::new(
        client,
        KubeOptions::example(),
        CodeStore::new(Arc::new(InMemory::new())),
    );
    let t = b.invoke_target(&ns(), "hello").await.unwrap();
    assert_eq!(
        t.base_url,
        format!("http://fn-hello.sless-fn-{}.svc.cluster.local", ns())
    );
    assert_eq!(t.timeout, Duration::from_secs(30));
    assert!(t.lease.is_none());
    let err = b.invoke_target(&ns(), "hello").await.unwrap_err();
    assert!(matches!(err, sless_operator::Error::NotReady(_)), "{err}");
    drop(b);
    finish(task).await.assert_complete();
}

fn tr_uri(rest: &str) -> String {
    format!(
        "/apis/sless.kube5s.ru/v1alpha1/namespaces/{}/triggers{rest}",
        ns()
    )
}

fn trigger_json(name: &str, phase: Option<&str>) -> Value {
    let mut t = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Trigger",
        "metadata": {"name": name, "namespace": ns(), "resourceVersion": "3",
                     "creationTimestamp": "2026-12-02T10:00:00Z"},
        "spec": {"function": "hello", "type": "cron", "schedule": "*/5 * * * *", "enabled": true},
    });
    if let Some(p) = phase {
        t["status"] = json!({"phase": p});
    }
    t
}

#[tokio::test]
async fn triggers_are_trigger_resources() {
    let mut steps = ensure_steps(true);
    steps.extend(
        [Step::new(Method::POST, tr_uri("?")).status(201).check(|b| {
            assert_eq!(b["kind"], "Trigger");
            assert_eq!(b["spec"]["type"], "cron");
            assert_eq!(b["spec"]["schedule"], "*/5 * * * *");
            assert_eq!(b["spec"]["function"], "hello");
            assert_eq!(b["spec"]["enabled"], true);
        })],
    );
    steps.extend(ensure_steps(false));
    steps.extend([
        Step::new(Method::POST, tr_uri("?")).answer(
            409,
            status_body(
                409,
                "AlreadyExists",
                "triggers.sless.kube5s.ru \"tick\" already exists",
            ),
        ),
        Step::new(Method::GET, tr_uri("?")).answer(
            200,
            json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "TriggerList", "metadata": {},
                   "items": [trigger_json("zz", Some("Active")), trigger_json("tick", None)]}),
        ),
        Step::new(Method::GET, tr_uri("/tick")).answer(200, trigger_json("tick", Some("Active"))),
        Step::new(Method::GET, tr_uri("/tick")).answer(200, trigger_json("tick", Some("Active"))),
        Step::new(Method::PUT, tr_uri("/tick?")).check(|b| {
            assert_eq!(b["spec"]["schedule"], "0 * * * *");
            assert_eq!(b["spec"]["function"], "hello", "kept");
        }),
        Step::new(Method::DELETE, tr_uri("/tick?")).answer(200, trigger_json("tick", None)),
    ]);
    let out = scenario(steps, async |r| {
        let body =
            json!({"name": "tick", "function": "hello", "type": "cron", "schedule": "*/5 * * * *"});
        let path = sless_wire::paths::triggers(&ns());
        let (status, created) = r.call(Method::POST, &path, Some(body.clone())).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["status"]["phase"], "Waiting");
        let (status, _) = r.call(Method::POST, &path, Some(body)).await;
        assert_eq!(status, StatusCode::CONFLICT);
        let (status, list) = r.call(Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["tick", "zz"]);
        assert_eq!(list["items"][1]["status"]["phase"], "Active");
        let one = sless_wire::paths::trigger(&ns(), "tick");
        let (status, updated) = r
            .call(Method::PATCH, &one, Some(json!({"schedule": "0 * * * *"})))
            .await;
        assert_eq!(status, StatusCode::OK, "{updated}");
        let (status, _) = r.call(Method::DELETE, &one, None).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn cron_seconds_other_than_zero_are_a_400_naming_schedule_with_no_write() {
    // Seconds = 0 is kept as written in the resource (the CronJob gets the
    // five-field form); any other seconds field is refused before the
    // Trigger is written: a CronJob runs at minute resolution.
    let mut steps = ensure_steps(true);
    steps.push(Step::new(Method::POST, tr_uri("?")).status(201).check(|b| {
        assert_eq!(b["spec"]["schedule"], "0 */5 * * * *", "as written");
    }));
    // The second create: the namespace is known, only checked; no POST.
    steps.extend(ensure_steps(false));
    // The update: the API layer's read and the backend's read; no PUT.
    steps.push(Step::new(Method::GET, tr_uri("/tick")).answer(200, trigger_json("tick", None)));
    steps.push(Step::new(Method::GET, tr_uri("/tick")).answer(200, trigger_json("tick", None)));
    let out = scenario(steps, async |r| {
        let path = sless_wire::paths::triggers(&ns());
        let create = |name: &str, schedule: &str| {
            json!({"name": name, "function": "hello", "type": "cron", "schedule": schedule})
        };
        let (status, created) = r
            .call(Method::POST, &path, Some(create("tick", "0 */5 * * * *")))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["spec"]["schedule"], "0 */5 * * * *");

        let (status, err) = r
            .call(Method::POST, &path, Some(create("fast", "*/10 * * * * *")))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
        assert_eq!(err["error"]["code"], "invalid_field", "{err}");
        assert_eq!(err["error"]["field"], "schedule", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains("Kubernetes backend"), "{message}");
        assert!(message.contains("minute resolution"), "{message}");

        let one = sless_wire::paths::trigger(&ns(), "tick");
        let (status, err) = r
            .call(
                Method::PATCH,
                &one,
                Some(json!({"schedule": "30 */5 * * * *"})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
        assert_eq!(err["error"]["code"], "invalid_field", "{err}");
        assert_eq!(err["error"]["field"], "schedule", "{err}");
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn jobs_are_functionjob_resources_with_generations() {
    let ju = |rest: &str| {
        format!(
            "/apis/sless.kube5s.ru/v1alpha1/namespaces/{}/functionjobs{rest}",
            ns()
        )
    };
    let job_json = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "FunctionJob",
        "metadata": {"name": "once", "namespace": ns(), "generation": 3, "creationTimestamp": "2026-12-02T10:00:00Z"},
        "spec": {"runtime": "nodejs20", "entrypoint": "index.handler", "envVars": {}, "input": "{\"a\":1}",
                 "runId": 2, "memoryMb": 128, "timeoutSec": 30,
                 "code": {"key": "code/x/ee.nodejs20.tar.gz", "sha256": "ee"}},
        "status": {"phase": "Succeeded", "message": "{\"b\":2}", "observedGeneration": 3},
    });
    let mut steps = ensure_steps(true);
    steps.push(Step::new(Method::POST, ju("?")).status(201).check(|b| {
        assert_eq!(b["kind"], "FunctionJob");
        assert_eq!(b["spec"]["input"], "{\"x\":1}");
        assert_eq!(b["spec"]["runId"], 7);
        assert_eq!(b["spec"]["runtime"], "python3.11");
    }));
    steps.push(Step::new(Method::GET, ju("/once")).answer(200, job_json));
    let out = scenario(steps, async |r| {
        let body = json!({"name": "once", "runtime": "python3.11", "entrypoint": "main.handler",
                          "input": "{\"x\":1}", "run_id": 7});
        let (status, created) = r
            .call(Method::POST, &sless_wire::paths::jobs(&ns()), Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["status"]["phase"], "Pending");
        let (status, got) = r
            .call(Method::GET, &sless_wire::paths::job(&ns(), "once"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{got}");
        assert_eq!(got["generation"], 3);
        assert_eq!(got["status"]["observed_generation"], 3);
        assert_eq!(got["status"]["phase"], "Succeeded");
        assert_eq!(got["status"]["message"], "{\"b\":2}");
        assert_eq!(got["status"]["code_sha256"], "ee");
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn services_are_service_resources() {
    let su = |rest: &str| {
        format!(
            "/apis/sless.kube5s.ru/v1alpha1/namespaces/{}/services{rest}",
            ns()
        )
    };
    let mut steps = ensure_steps(true);
    steps.push(Step::new(Method::POST, su("?")).status(201).check(|b| {
        assert_eq!(b["kind"], "Service");
        assert_eq!(b["spec"]["entrypoint"], "app.py");
        assert_eq!(b["spec"]["healthPath"], "/");
        assert_eq!(b["spec"]["memoryMb"], 128);
    }));
    steps.extend(ensure_steps(false));
    steps.push(Step::new(Method::POST, su("?")).answer(
        422,
        status_body(
            422,
            "Invalid",
            "Service.sless.kube5s.ru \"api\" is invalid: spec.memoryMb",
        ),
    ));
    let out = scenario(steps, async |r| {
        let body = json!({"name": "api", "runtime": "python3.11", "entrypoint": "app.py"});
        let (status, created) = r
            .call(
                Method::POST,
                &sless_wire::paths::services(&ns()),
                Some(body.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["status"]["phase"], "Pending");
        let (status, err) = r
            .call(
                Method::POST,
                &sless_wire::paths::services(&ns()),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn metrics_are_served_without_a_token_and_make_no_api_calls() {
    let out = scenario(vec![], async |r| {
        let req = Request::builder()
            .uri(sless_wire::paths::METRICS)
            .body(Body::empty())
            .unwrap();
        let resp = r.app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            resp.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(
            text.contains("# TYPE sless_http_requests_total counter\n"),
            "{text}"
        );
        // The controllers are not started here: not running, no reconciles.
        assert!(text.contains("sless_controllers_running 0\n"), "{text}");
        assert!(!text.contains("sless_reconciles_total{"), "{text}");
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn cron_runs_and_restarts_from_the_resource_status_reach_the_api() {
    let mut active = trigger_json("tick", None);
    active["status"] = json!({
        "phase": "Active", "nextRunAt": "2026-12-02T10:10:00Z", "runs": 4,
        "counted": {"job": "tr-tick-29000000", "createdAt": "2026-12-02T10:05:00Z"},
        "lastRun": {"job": "tr-tick-29000000", "startedAt": "2026-12-02T10:05:01Z",
                    "completedAt": "2026-12-02T10:05:03Z", "ok": false,
                    "message": "the call failed (BackoffLimitExceeded); see the trigger log"},
    });
    let mut disabled = active.clone();
    disabled["spec"]["enabled"] = json!(false);
    disabled["status"]["phase"] = json!("Disabled");
    let mut f = function_json("hello", Some("Ready"));
    f["status"]["restarts"] = json!(3);
    let svc = json!({
        "apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Service",
        "metadata": {"name": "api", "namespace": ns(), "creationTimestamp": "2026-12-02T10:00:00Z"},
        "spec": {"runtime": "python3.11", "entrypoint": "app.py", "envVars": {}, "memoryMb": 128,
                 "timeoutSec": 30, "healthPath": "/"},
        "status": {"phase": "Ready", "restarts": 2},
    });
    let steps = vec![
        Step::new(Method::GET, tr_uri("/tick")).answer(200, active),
        Step::new(Method::GET, tr_uri("/tick")).answer(200, disabled),
        Step::new(Method::GET, fn_uri("/hello")).answer(200, f),
        Step::new(
            Method::GET,
            format!(
                "/apis/sless.kube5s.ru/v1alpha1/namespaces/{}/services/api",
                ns()
            ),
        )
        .answer(200, svc),
    ];
    let out = scenario(steps, async |r| {
        let one = sless_wire::paths::trigger(&ns(), "tick");
        let (status, t) = r.call(Method::GET, &one, None).await;
        assert_eq!(status, StatusCode::OK, "{t}");
        let s = &t["status"];
        assert_eq!(s["phase"], "Active");
        assert_eq!(s["next_run_at"], "2026-12-02T10:10:00Z");
        assert_eq!(s["runs"], 4);
        assert_eq!(s["skipped"], 0, "Kubernetes does not report skipped ticks");
        assert_eq!(
            s["last_run"],
            json!({"started_at": "2026-12-02T10:05:01Z", "completed_at": "2026-12-02T10:05:03Z",
                   "ok": false,
                   "message": "the call failed (BackoffLimitExceeded); see the trigger log"})
        );
        let (_, t) = r.call(Method::GET, &one, None).await;
        assert_eq!(t["status"]["phase"], "Disabled");
        assert!(t["status"]["next_run_at"].is_null(), "not scheduled");
        assert_eq!(t["status"]["runs"], 4, "history stays");
        let (status, f) = r
            .call(
                Method::GET,
                &sless_wire::paths::function(&ns(), "hello"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{f}");
        assert_eq!(f["status"]["restarts"], 3);
        let (status, s) = r
            .call(Method::GET, &sless_wire::paths::service(&ns(), "api"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{s}");
        assert_eq!(s["status"]["restarts"], 2);
    })
    .await;
    out.assert_complete();
}

// Scale to zero: the proxy side.

/// A Ready function that scales to zero with `instances` serving and
/// `timeoutSec` `timeout`.
fn scaling(instances: u32, timeout: u32) -> Value {
    let mut f = function_json("hello", Some("Ready"));
    f["spec"]["minInstances"] = json!(0);
    f["spec"]["timeoutSec"] = json!(timeout);
    f["status"]["instances"] = json!(instances);
    f
}

fn deployment_uri() -> String {
    format!(
        "/apis/apps/v1/namespaces/sless-fn-{}/deployments/fn-hello",
        ns()
    )
}

/// The Deployment `fn-hello` wanting `replicas` with `available` available.
fn deployment(replicas: i32, available: i32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "fn-hello", "namespace": format!("sless-fn-{}", ns())},
           "spec": {"replicas": replicas, "selector": {}, "template": {}},
           "status": {"replicas": available, "availableReplicas": available}})
}

/// The activity patch: a merge patch of `sless.kube5s.ru/last-request`
/// only, with a time within 5 s of now.
fn activity_patch() -> Step {
    Step::new(Method::PATCH, fn_uri("/hello?"))
        .check(|b| {
            let ann = b["metadata"]["annotations"].as_object().unwrap();
            assert_eq!(ann.len(), 1, "{b}");
            let t: k8s_openapi::jiff::Timestamp = ann["sless.kube5s.ru/last-request"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            let age = k8s_openapi::jiff::Timestamp::now().duration_since(t);
            assert!(age.as_secs().abs() <= 5, "recorded {age:?} ago");
            assert!(b.get("spec").is_none() && b.get("status").is_none());
        })
        .answer(200, scaling(1, 30))
}

fn backend(client: kube::Client) -> KubeBackend {
    KubeBackend::new(
        client,
        KubeOptions::example(),
        CodeStore::new(Arc::new(InMemory::new())),
    )
}

#[tokio::test]
async fn a_request_to_a_function_that_scales_to_zero_records_activity_and_holds_a_lease() {
    let (client, task) = start(vec![
        Step::new(Method::GET, fn_uri("/hello")).answer(200, scaling(1, 30)),
        activity_patch(),
        // Within the throttle: the second request patches nothing.
        Step::new(Method::GET, fn_uri("/hello")).answer(200, scaling(1, 30)),
    ]);
    let b = backend(client);
    let t = b.invoke_target(&ns(), "hello").await.unwrap();
    assert_eq!(
        t.base_url,
        format!("http://fn-hello.sless-fn-{}.svc.cluster.local", ns())
    );
    assert!(t.lease.is_some());
    assert_eq!(b.activity().in_flight(&ns(), "hello"), 1);
    let t2 = b.invoke_target(&ns(), "hello").await.unwrap();
    assert_eq!(b.activity().in_flight(&ns(), "hello"), 2);
    drop((t, t2));
    assert_eq!(b.activity().in_flight(&ns(), "hello"), 0);
    drop(b);
    finish(task).await.assert_complete();
}

#[tokio::test(start_paused = true)]
async fn a_long_request_refreshes_its_activity_and_its_end_is_recorded() {
    let (client, task) = start(vec![
        Step::new(Method::GET, fn_uri("/hello")).answer(200, scaling(1, 30)),
        activity_patch(),
        // 5 s later, still in flight: refreshed.
        activity_patch(),
        // The answer ended at 7 s: recorded at the end of the interval.
        activity_patch(),
    ]);
    let b = backend(client);
    let t = b.invoke_target(&ns(), "hello").await.unwrap();
    tokio::time::sleep(Duration::from_secs(7)).await;
    drop(t);
    // Nothing more once idle: the recorder forgets the function.
    tokio::time::sleep(Duration::from_secs(30)).await;
    drop(b);
    finish(task).await.assert_complete();
}

#[tokio::test]
async fn a_function_at_zero_is_woken_and_the_request_waits_for_its_replica() {
    let (client, task) = start(vec![
        Step::new(Method::GET, fn_uri("/hello")).answer(200, scaling(0, 30)),
        // The activity that makes the controller scale it up, first.
        activity_patch(),
        // Then the Deployment until it has an available replica.
        Step::new(Method::GET, deployment_uri()).answer(200, deployment(0, 0)),
        Step::new(Method::GET, deployment_uri()).answer(200, deployment(1, 0)),
        Step::new(Method::GET, deployment_uri()).answer(200, deployment(1, 1)),
    ]);
    let b = backend(client);
    let started = std::time::Instant::now();
    let t = b.invoke_target(&ns(), "hello").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900), "two polls");
    assert_eq!(
        t.base_url,
        format!("http://fn-hello.sless-fn-{}.svc.cluster.local", ns())
    );
    assert_eq!(t.timeout, Duration::from_secs(30));
    assert!(t.lease.is_some(), "the request holds a lease");
    drop(t);
    drop(b);
    finish(task).await.assert_complete();
}

#[tokio::test(start_paused = true)]
async fn a_function_that_does_not_come_back_in_time_is_a_503_naming_what_was_seen() {
    // timeoutSec 1: polls at 0, 0.5 and 1 s, then gives up.
    let mut steps = vec![
        Step::new(Method::GET, fn_uri("/hello")).answer(200, scaling(0, 1)),
        activity_patch(),
    ];
    for _ in 0..3 {
        steps.push(Step::new(Method::GET, deployment_uri()).answer(200, deployment(1, 0)));
    }
    let out = scenario(steps, async |r| {
        let (status, body) = r
            .call(
                Method::POST,
                &sless_wire::paths::function_invoke(&ns(), "hello"),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let msg = body["error"]["message"]
            .as_str()
            .or(body["message"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(msg.contains("scaling up from zero"), "{body}");
        assert!(
            msg.contains("Deployment fn-hello wants 1 replica(s), has 0 available"),
            "{body}"
        );
    })
    .await;
    out.assert_complete();
}

#[tokio::test]
async fn concurrent_requests_for_a_function_at_zero_share_one_wait() {
    use sless_operator::kube::activator::Activator;
    let (client, task) = start(vec![
        Step::new(Method::GET, deployment_uri()).answer(200, deployment(1, 0)),
        Step::new(Method::GET, deployment_uri()).answer(200, deployment(1, 1)),
    ]);
    let a = Activator::new(client);
    let dns = format!("sless-fn-{}", ns());
    let waits: Vec<_> = (0..8)
        .map(|_| a.wait_available(&dns, "fn-hello", Duration::from_secs(30)))
        .collect();
    let results = futures_util::future::join_all(waits).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    drop(a);
    // Eight callers, one poll loop: two GETs in all.
    finish(task).await.assert_complete();
}

/// `secret_env_vars`: the Function resource holds the names and hash, the
/// values go to the Secret `fn-<name>-env` of the deploy namespace; an
/// update writes the new values before the spec that rolls the pods; no
/// answer carries a value.
#[tokio::test]
async fn secret_env_vars_go_to_a_secret_and_the_resource_holds_names_and_hash() {
    let n = ns();
    let d = format!("sless-fn-{n}");
    let apply = "?&force=true&fieldManager=sless-operator";
    let secret_uri = format!("/api/v1/namespaces/{d}/secrets/fn-hello-env{apply}");
    let one = |v: &str| BTreeMap::from([("API_KEY".to_string(), v.to_string())]);
    let (h1, h2) = (
        sless_wire::secret_hash(&one("hunter2")),
        sless_wire::secret_hash(&one("swordfish")),
    );
    let mut stored = function_json("hello", Some("Ready"));
    stored["spec"]["secretEnvVars"] = json!({"names": ["API_KEY"], "hash": h1});
    let mut steps = ensure_steps(true);
    let (h1c, h2c) = (h1.clone(), h2.clone());
    steps.extend([
        Step::new(Method::POST, fn_uri("?"))
            .status(201)
            .check(move |b| {
                assert!(!b.to_string().contains("hunter2"), "{b}");
                assert_eq!(
                    b["spec"]["secretEnvVars"],
                    json!({"names": ["API_KEY"], "hash": h1c})
                );
            }),
        Step::new(Method::PATCH, secret_uri.clone()).check(|b| {
            assert_eq!(b["kind"], "Secret");
            assert_eq!(
                b["metadata"]["labels"]["sless.kube5s.ru/owner-name"],
                "hello"
            );
            // base64("hunter2")
            assert_eq!(b["data"]["API_KEY"], "aHVudGVyMg==");
        }),
        Step::new(Method::GET, fn_uri("/hello")).answer(200, stored.clone()),
        Step::new(Method::GET, fn_uri("/hello")).answer(200, stored.clone()),
        Step::new(Method::PATCH, secret_uri)
            .check(|b| assert_eq!(b["data"]["API_KEY"], "c3dvcmRmaXNo")),
        Step::new(Method::PUT, fn_uri("/hello?")).check(move |b| {
            assert!(!b.to_string().contains("swordfish"), "{b}");
            assert_eq!(b["spec"]["secretEnvVars"]["hash"], h2c);
            assert_eq!(
                b["spec"]["code"]["key"], "code/x/aaaa.python3.11.tar.gz",
                "no rebuild"
            );
        }),
    ]);
    let out = scenario(steps, async |r| {
        let mut body = create_body();
        body["secret_env_vars"] = json!({"API_KEY": "hunter2"});
        let (status, got) = r
            .call(
                Method::POST,
                &sless_wire::paths::functions(&ns()),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{got}");
        assert!(!got.to_string().contains("hunter2"), "{got}");
        assert_eq!(got["spec"]["secret_env_vars"]["hash"], h1.as_str());
        let (status, got) = r
            .call(
                Method::PATCH,
                &sless_wire::paths::function(&ns(), "hello"),
                Some(json!({"secret_env_vars": {"API_KEY": "swordfish"}})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{got}");
        assert!(!got.to_string().contains("swordfish"), "{got}");
        assert_eq!(got["spec"]["secret_env_vars"]["hash"], h2.as_str());
        assert_eq!(got["spec"]["secret_env_vars"]["names"], json!(["API_KEY"]));
    })
    .await;
    out.assert_complete();
}
