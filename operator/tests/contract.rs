//! The REST API contract, run once per backend: every scenario here runs
//! against the real `sless-operator` binary with the embedded local backend
//! (`local::…`) and again with `--backend kube` (`kube::…`), where the
//! Kubernetes API is the in-memory fake API server in `fake_kube` (served
//! over HTTP on loopback through a kubeconfig; the operator's controllers run
//! against it) and the object store is a real S3-compatible server (moto).
//!
//! The provider cannot tell the backends apart, so neither may these tests:
//! they speak only the public REST API. What the fake cannot do (run pods,
//! so nothing becomes Ready and nothing can be invoked) is left to the
//! per-backend suites: `local_*`/`triggers`/`jobs`/`services` run real
//! processes, `kube_*` assert the exact API requests of each controller.

mod fake_kube;
mod moto;
mod support;

use fake_kube::FakeKube;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Digest as _;
use sless_wire::paths;
use std::time::{Duration, Instant};
use support::{Client, Operator, status_json, zip_of};

/// One operator under test, with whatever its backend needs kept alive.
enum Target {
    Local(Operator),
    Kube(fake_kube::operator::KubeOperator),
}

impl Target {
    async fn local() -> Option<Target> {
        Some(Target::Local(Operator::start()))
    }

    async fn kube() -> Option<Target> {
        fake_kube::operator::start().await.map(Target::Kube)
    }

    fn op(&self) -> &Operator {
        match self {
            Target::Local(op) => op,
            Target::Kube(k) => &k.op,
        }
    }

    /// The fake API server of a kube target.
    fn fake(&self) -> &FakeKube {
        match self {
            Target::Kube(k) => &k.fake,
            Target::Local(_) => panic!("not a kube target"),
        }
    }

    /// An API client for `sub`, its namespace ensured.
    async fn user(&self, sub: &str) -> Client {
        let c = self.op().client(sub);
        c.ensure().await;
        c
    }
}

/// Declares each scenario once per backend: `local::name` and `kube::name`.
macro_rules! contract {
    ($($scenario:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test]
                async fn $scenario() {
                    if let Some(t) = super::Target::local().await {
                        super::$scenario(&t).await;
                    }
                }
            )*
        }
        mod kube {
            $(
                #[tokio::test]
                async fn $scenario() {
                    if let Some(t) = super::Target::kube().await {
                        super::$scenario(&t).await;
                        let log = t.op().log();
                        assert!(!log.contains("panicked"), "operator panicked:\n{log}");
                        // The installed operator's RBAC allows every call it made.
                        super::fake_kube::rbac::assert_covered(t.fake());
                        // It really was the kube backend answering.
                        let seen = t.fake().requests();
                        assert!(
                            seen.iter().any(|r| r.contains("/apis/sless.kube5s.ru/v1alpha1/namespaces/")),
                            "the fake API server saw no custom-resource request: {seen:#?}"
                        );
                    }
                }
            )*
        }
    };
}

contract!(
    namespaces_are_idempotent_and_start_empty,
    functions_create_read_update_delete,
    code_uploads_are_checked_and_recorded,
    bad_input_is_a_400_naming_the_field,
    missing_objects_are_404,
    another_users_namespace_is_403,
    triggers_create_read_update_delete,
    jobs_create_read_update_delete,
    services_create_read_update_delete,
);

/// Polls `GET path` until it answers 404 (a delete has finished).
async fn wait_gone(c: &Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = c.call(Method::GET, path, None).await;
        if code == 404 {
            assert_eq!(body["error"]["code"], "not_found", "{body}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path} still there 30 s after delete: {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The names in a list answer (`{"items": [...]}`).
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|o| o["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn assert_400(what: &str, (code, body): (u16, Value), field: &str) {
    assert_eq!(code, 400, "{what}: expected 400, got {code} {body}");
    assert_eq!(body["error"]["field"], field, "{what}: {body}");
    assert!(
        !body["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{what}: empty message: {body}"
    );
}

async fn namespaces_are_idempotent_and_start_empty(t: &Target) {
    let c = t.op().client("contract-ns@example.com");
    let (code, first) = c
        .call(Method::POST, &paths::ensure_namespace(&c.namespace), None)
        .await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["namespace"], c.namespace);
    assert_eq!(first["created"], true, "{first}");
    let (code, again) = c
        .call(Method::POST, &paths::ensure_namespace(&c.namespace), None)
        .await;
    assert_eq!(code, 200, "{again}");
    assert_eq!(again["created"], false, "{again}");
    for list in [
        paths::functions(&c.namespace),
        paths::triggers(&c.namespace),
        paths::jobs(&c.namespace),
        paths::services(&c.namespace),
        paths::invocations(&c.namespace),
    ] {
        let (code, body) = c.call(Method::GET, &list, None).await;
        assert_eq!(code, 200, "{list}: {body}");
        assert_eq!(body, json!({"items": []}), "{list}");
    }
    // The namespace's HTML page, for a browser with the token in the query.
    let page = reqwest::Client::new()
        .get(c.url(&paths::funcs_page(&c.namespace)))
        .query(&[("token", &c.token)])
        .send()
        .await
        .expect("funcs page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap_or_default();
    assert!(html.contains(&c.namespace), "{html}");
}

async fn functions_create_read_update_delete(t: &Target) {
    let c = t.user("contract-fn@example.com").await;
    let create = json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler",
                        "env_vars": {"B": "2", "A": "1"}});
    let (code, created) = c.create(create.clone()).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["name"], "hello");
    assert_eq!(created["namespace"], c.namespace);
    assert_eq!(created["spec"]["runtime"], "python3.11");
    assert_eq!(created["spec"]["entrypoint"], "main.handler");
    assert_eq!(created["spec"]["env_vars"], json!({"A": "1", "B": "2"}));
    assert_eq!(created["spec"]["memory_mb"], 128, "default memory");
    assert_eq!(created["spec"]["timeout_sec"], 30, "default timeout");
    assert_eq!(
        created["status"]["phase"], "Pending",
        "no code yet: {created}"
    );
    assert_eq!(
        created["status"]["invoke_path"],
        paths::function_invoke(&c.namespace, "hello")
    );
    assert!(
        created["created_at"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );

    let (code, dup) = c.create(create).await;
    assert_eq!(code, 409, "a second create of the same name: {dup}");
    assert_eq!(dup["error"]["code"], "already_exists", "{dup}");

    let (code, got) = c.get("hello").await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["spec"], created["spec"]);

    let path = paths::function(&c.namespace, "hello");
    let (code, updated) = c
        .call(
            Method::PATCH,
            &path,
            Some(json!({"memory_mb": 256, "env_vars": {"A": "9"}})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["memory_mb"], 256);
    assert_eq!(updated["spec"]["env_vars"], json!({"A": "9"}));
    assert_eq!(updated["spec"]["entrypoint"], "main.handler", "untouched");
    let (_, got) = c.get("hello").await;
    assert_eq!(got["spec"], updated["spec"], "the update is what GET reads");

    let (code, _) = c
        .create(json!({"name": "second", "runtime": "nodejs20", "entrypoint": "index.handler"}))
        .await;
    assert_eq!(code, 201);
    let (code, list) = c
        .call(Method::GET, &paths::functions(&c.namespace), None)
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(names(&list), ["hello", "second"], "sorted by name");
    let html = c
        .req(Method::GET, &paths::funcs_page(&c.namespace))
        .send()
        .await
        .expect("funcs page")
        .text()
        .await
        .unwrap_or_default();
    assert!(
        html.contains("hello") && html.contains("second") && html.contains("Pending"),
        "the HTML page lists the functions: {html}"
    );

    let (code, body) = c.call(Method::DELETE, &path, None).await;
    assert!(code == 204 || code == 202, "delete: {code} {body}");
    wait_gone(&c, &path).await;
    let (_, list) = c
        .call(Method::GET, &paths::functions(&c.namespace), None)
        .await;
    assert_eq!(names(&list), ["second"]);
    // The name is free again.
    let (code, body) = c
        .create(json!({"name": "hello", "runtime": "nodejs20", "entrypoint": "index.handler"}))
        .await;
    assert_eq!(code, 201, "re-create after delete: {body}");
    assert_eq!(body["spec"]["runtime"], "nodejs20");
}

async fn code_uploads_are_checked_and_recorded(t: &Target) {
    let c = t.user("contract-code@example.com").await;
    let (code, _) = c
        .create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201);
    let zip = zip_of(&[("main.py", "def handler(event, context):\n    return 1\n")]);
    let sha = hex::encode(sha2::Sha256::digest(&zip));
    let code_path = paths::function_code(&c.namespace, "f");

    // A wrong checksum, an unsafe path, not a zip: 400, nothing recorded.
    let r = c
        .req(Method::PUT, &code_path)
        .query(&[("sha256", "0".repeat(64))])
        .header("content-type", "application/zip")
        .body(zip.clone())
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(r).await;
    assert_eq!(status, 400, "wrong sha256: {body}");
    let (status, body) = c
        .put_code(&code_path, zip_of(&[("../evil.py", "x = 1\n")]))
        .await;
    assert_eq!(status, 400, "zip slip: {body}");
    let (status, body) = c.put_code(&code_path, b"not a zip at all".to_vec()).await;
    assert_eq!(status, 400, "not a zip: {body}");
    let (_, got) = c.get("f").await;
    assert!(got["status"]["code_sha256"].is_null(), "{got}");

    let (status, body) = c.upload("f", zip.clone()).await;
    assert!((200..300).contains(&status), "upload: {status} {body}");
    assert_eq!(body["status"]["code_sha256"], sha, "{body}");
    let (_, got) = c.get("f").await;
    assert_eq!(got["status"]["code_sha256"], sha, "{got}");
    assert_ne!(got["status"]["phase"], "Failed", "{got}");

    // The same code again changes nothing.
    let (status, again) = c.upload("f", zip).await;
    assert!((200..300).contains(&status), "re-upload: {status} {again}");
    assert_eq!(again["status"]["code_sha256"], sha);
    assert_eq!(again["updated_at"], got["updated_at"], "{again}\n{got}");

    let (status, body) = c.upload("nobody", zip_of(&[("main.py", "x = 1\n")])).await;
    assert_eq!(status, 404, "upload to a missing function: {body}");
}

async fn bad_input_is_a_400_naming_the_field(t: &Target) {
    let c = t.user("contract-bad@example.com").await;
    let fns = paths::functions(&c.namespace);
    let cases = [
        (
            json!({"name": "Bad_Name", "runtime": "python3.11", "entrypoint": "m.h"}),
            "name",
        ),
        (
            json!({"name": "f", "runtime": "cobol", "entrypoint": "m.h"}),
            "runtime",
        ),
        (
            json!({"name": "f", "runtime": "python3.11", "entrypoint": "nodot"}),
            "entrypoint",
        ),
        (
            json!({"name": "f", "runtime": "python3.11", "entrypoint": "m.h", "memory_mb": 1}),
            "memory_mb",
        ),
        (
            json!({"name": "f", "runtime": "python3.11", "entrypoint": "m.h", "timeout_sec": 0}),
            "timeout_sec",
        ),
        (
            json!({"name": "f", "runtime": "python3.11", "entrypoint": "m.h", "env_vars": {"1X": "v"}}),
            "env_vars.1X",
        ),
        (
            json!({"runtime": "python3.11", "entrypoint": "m.h"}),
            "name",
        ),
    ];
    for (body, field) in cases {
        let what = format!("create {body}");
        assert_400(&what, c.call(Method::POST, &fns, Some(body)).await, field);
    }
    let (code, _) = c
        .create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "m.h"}))
        .await;
    assert_eq!(code, 201);
    let f = paths::function(&c.namespace, "f");
    assert_400(
        "patch memory",
        c.call(Method::PATCH, &f, Some(json!({"memory_mb": 999999})))
            .await,
        "memory_mb",
    );
    let (_, got) = c.get("f").await;
    assert_eq!(
        got["spec"]["memory_mb"], 128,
        "a refused update changes nothing"
    );

    let triggers = paths::triggers(&c.namespace);
    assert_400(
        "cron typo",
        c.call(
            Method::POST,
            &triggers,
            Some(json!({"name": "t", "function": "f", "type": "cron", "schedule": "*/5 * * *"})),
        )
        .await,
        "schedule",
    );
    assert_400(
        "unknown trigger type",
        c.call(
            Method::POST,
            &triggers,
            Some(json!({"name": "t", "function": "f", "type": "smoke"})),
        )
        .await,
        "type",
    );
    assert_400(
        "job memory",
        c.call(
            Method::POST,
            &paths::jobs(&c.namespace),
            Some(
                json!({"name": "j", "runtime": "python3.11", "entrypoint": "m.h", "memory_mb": 1}),
            ),
        )
        .await,
        "memory_mb",
    );
    assert_400(
        "service health path",
        c.call(Method::POST,
            &paths::services(&c.namespace),
            Some(json!({"name": "s", "runtime": "python3.11", "entrypoint": "app.py", "health_path": "x"})),
        )
        .await,
        "health_path",
    );
    let (code, body) = status_json(
        c.req(Method::POST, &fns)
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 400, "malformed JSON: {body}");
    // Nothing was created by any of it.
    let (_, list) = c.call(Method::GET, &fns, None).await;
    assert_eq!(names(&list), ["f"]);
    for list in [
        triggers,
        paths::jobs(&c.namespace),
        paths::services(&c.namespace),
    ] {
        let (_, body) = c.call(Method::GET, &list, None).await;
        assert_eq!(body, json!({"items": []}), "{list}");
    }
}

async fn missing_objects_are_404(t: &Target) {
    let c = t.user("contract-404@example.com").await;
    let ns = &c.namespace;
    for path in [
        paths::function(ns, "ghost"),
        paths::trigger(ns, "ghost"),
        paths::job(ns, "ghost"),
        paths::service(ns, "ghost"),
    ] {
        for method in [Method::GET, Method::DELETE] {
            let (code, body) = c.call(method.clone(), &path, None).await;
            assert_eq!(code, 404, "{method} {path}: {body}");
            assert_eq!(body["error"]["code"], "not_found", "{body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("ghost")),
                "{body}"
            );
        }
        let (code, body) = c
            .call(Method::PATCH, &path, Some(json!({"memory_mb": 256})))
            .await;
        assert_eq!(code, 404, "PATCH {path}: {body}");
    }
    let (code, body) = c
        .call(Method::GET, &paths::function_logs(ns, "ghost"), None)
        .await;
    assert_eq!(code, 404, "logs: {body}");
    let (code, body) = c.invoke("ghost", &json!({})).await;
    assert_eq!(code, 404, "invoke: {body}");

    // A namespace never ensured is made on first use.
    let fresh = t.op().client("never-ensured@example.com");
    let (code, body) = fresh
        .create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "m.h"}))
        .await;
    assert_eq!(code, 201, "create in a namespace not ensured yet: {body}");
    assert_eq!(body["namespace"], fresh.namespace);
}

async fn another_users_namespace_is_403(t: &Target) {
    let alice = t.user("contract-alice@example.com").await;
    let bob = t.user("contract-bob@example.com").await;
    let (code, _) = alice
        .create(json!({"name": "secret", "runtime": "python3.11", "entrypoint": "m.h"}))
        .await;
    assert_eq!(code, 201);
    let alices = paths::function(&alice.namespace, "secret");
    for (method, body) in [
        (Method::GET, None),
        (Method::PATCH, Some(json!({"memory_mb": 256}))),
        (Method::DELETE, None),
    ] {
        let (code, resp) = bob.call(method.clone(), &alices, body).await;
        assert_eq!(code, 403, "bob {method} alice's function: {resp}");
    }
    let (code, resp) = bob
        .call(Method::GET, &paths::functions(&alice.namespace), None)
        .await;
    assert_eq!(code, 403, "{resp}");
    let (code, resp) = bob
        .call(
            Method::POST,
            &paths::ensure_namespace(&alice.namespace),
            None,
        )
        .await;
    assert_eq!(code, 403, "{resp}");
    // Alice's function is untouched; bob's namespace does not show it.
    let (code, got) = alice.get("secret").await;
    assert_eq!(code, 200);
    assert_eq!(got["spec"]["memory_mb"], 128);
    let (_, list) = bob
        .call(Method::GET, &paths::functions(&bob.namespace), None)
        .await;
    assert_eq!(list, json!({"items": []}));
    let r = reqwest::Client::new()
        .get(alice.url(&paths::functions(&alice.namespace)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "no token");
}

async fn triggers_create_read_update_delete(t: &Target) {
    let c = t.user("contract-trigger@example.com").await;
    let (code, _) = c
        .create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201);
    let list_path = paths::triggers(&c.namespace);
    let cron = json!({"name": "tick", "function": "f", "type": "cron",
                      "schedule": "*/5 * * * *", "payload": "{\"n\": 1}"});
    let (code, created) = c.call(Method::POST, &list_path, Some(cron.clone())).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["function"], "f");
    assert_eq!(created["spec"]["type"], "cron");
    assert_eq!(created["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(created["spec"]["enabled"], true);
    assert_eq!(
        created["status"]["phase"], "Waiting",
        "the function is not ready: {created}"
    );
    let (code, dup) = c.call(Method::POST, &list_path, Some(cron)).await;
    assert_eq!(code, 409, "{dup}");

    let (code, http) = c
        .call(
            Method::POST,
            &list_path,
            Some(json!({"name": "web", "function": "f", "type": "http"})),
        )
        .await;
    assert_eq!(code, 201, "{http}");
    assert_eq!(http["spec"]["type"], "http");

    let tick = paths::trigger(&c.namespace, "tick");
    let (code, updated) = c
        .call(
            Method::PATCH,
            &tick,
            Some(json!({"schedule": "0 * * * *", "enabled": false})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["schedule"], "0 * * * *");
    assert_eq!(updated["spec"]["enabled"], false);
    assert_eq!(updated["status"]["phase"], "Disabled", "{updated}");
    assert_400(
        "patch a cron typo",
        c.call(
            Method::PATCH,
            &tick,
            Some(json!({"schedule": "61 * * * *"})),
        )
        .await,
        "schedule",
    );
    let (_, got) = c.call(Method::GET, &tick, None).await;
    assert_eq!(
        got["spec"]["schedule"], "0 * * * *",
        "refused update kept out"
    );

    let (code, list) = c.call(Method::GET, &list_path, None).await;
    assert_eq!(code, 200);
    assert_eq!(names(&list), ["tick", "web"]);

    let (code, body) = c.call(Method::DELETE, &tick, None).await;
    assert!(code == 204 || code == 202, "delete: {code} {body}");
    wait_gone(&c, &tick).await;
    let (_, list) = c.call(Method::GET, &list_path, None).await;
    assert_eq!(names(&list), ["web"]);
}

async fn jobs_create_read_update_delete(t: &Target) {
    let c = t.user("contract-job@example.com").await;
    let list_path = paths::jobs(&c.namespace);
    let spec = json!({"name": "sum", "runtime": "python3.11", "entrypoint": "main.handler",
                      "input": "{\"a\": 1}"});
    let (code, created) = c.call(Method::POST, &list_path, Some(spec.clone())).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["generation"], 1);
    assert_eq!(created["status"]["phase"], "Pending", "{created}");
    assert_eq!(created["spec"]["input"], "{\"a\": 1}");
    let (code, dup) = c.call(Method::POST, &list_path, Some(spec)).await;
    assert_eq!(code, 409, "{dup}");

    let job = paths::job(&c.namespace, "sum");
    let (code, updated) = c
        .call(Method::PATCH, &job, Some(json!({"input": "{\"a\": 2}"})))
        .await;
    assert!((200..300).contains(&code), "{code} {updated}");
    assert_eq!(updated["spec"]["input"], "{\"a\": 2}");
    assert_eq!(updated["generation"], 2, "a new input is a new run");
    let (code, same) = c
        .call(Method::PATCH, &job, Some(json!({"input": "{\"a\": 2}"})))
        .await;
    assert!((200..300).contains(&code), "{code} {same}");
    assert_eq!(same["generation"], 2, "the same spec is not a new run");

    let zip = zip_of(&[("main.py", "def handler(event, context):\n    return 1\n")]);
    let (code, body) = c.put_code(&paths::job_code(&c.namespace, "sum"), zip).await;
    assert!((200..300).contains(&code), "upload: {code} {body}");
    assert_eq!(body["generation"], 3, "new code is a new run: {body}");

    let (code, body) = c.call(Method::DELETE, &job, None).await;
    assert!(code == 204 || code == 202, "delete: {code} {body}");
    wait_gone(&c, &job).await;
}

async fn services_create_read_update_delete(t: &Target) {
    let c = t.user("contract-svc@example.com").await;
    let list_path = paths::services(&c.namespace);
    let spec = json!({"name": "web", "runtime": "nodejs20", "entrypoint": "server.js",
                      "env_vars": {"MODE": "a"}});
    let (code, created) = c.call(Method::POST, &list_path, Some(spec.clone())).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["entrypoint"], "server.js");
    assert_eq!(created["status"]["phase"], "Pending", "{created}");
    let (code, dup) = c.call(Method::POST, &list_path, Some(spec)).await;
    assert_eq!(code, 409, "{dup}");

    let svc = paths::service(&c.namespace, "web");
    let (code, updated) = c
        .call(
            Method::PATCH,
            &svc,
            Some(json!({"env_vars": {"MODE": "b"}, "memory_mb": 256})),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["env_vars"], json!({"MODE": "b"}));
    assert_eq!(updated["spec"]["memory_mb"], 256);
    let (_, got) = c.call(Method::GET, &svc, None).await;
    assert_eq!(got["spec"], updated["spec"]);

    let (code, list) = c.call(Method::GET, &list_path, None).await;
    assert_eq!(code, 200);
    assert_eq!(names(&list), ["web"]);
    let (code, body) = c.call(Method::DELETE, &svc, None).await;
    assert!(code == 204 || code == 202, "delete: {code} {body}");
    wait_gone(&c, &svc).await;
}
