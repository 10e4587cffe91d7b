//! End-to-end on a real cluster (ignored by default; see docs/kubernetes.md):
//! a deployed operator (`SLESS_E2E_OPERATOR_URL`, `SLESS_E2E_TOKEN`) and
//! `KUBECONFIG` for checking the children. Lifecycle of one function: create,
//! upload, build, Ready, invoke, env update without rebuild, a Deployment
//! deleted by hand comes back, delete removes Deployment and Service.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::io::{Cursor, Write};
use std::time::{Duration, Instant};

struct E2e {
    http: reqwest::Client,
    base: String,
    token: String,
    ns: String,
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} must be set for the cluster tests"))
}

impl E2e {
    fn new() -> E2e {
        let token = env("SLESS_E2E_TOKEN");
        let sub = jwt_sub(&token);
        E2e {
            http: reqwest::Client::new(),
            base: env("SLESS_E2E_OPERATOR_URL")
                .trim_end_matches('/')
                .to_string(),
            ns: sless_wire::namespace_for_sub(&sub),
            token,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn wait_phase(&self, name: &str, want: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (_, f) = self
                .call(
                    reqwest::Method::GET,
                    &sless_wire::paths::function(&self.ns, name),
                    None,
                )
                .await;
            if f["status"]["phase"] == want {
                return f;
            }
            assert_ne!(f["status"]["phase"], "Failed", "{f}");
            assert!(Instant::now() < deadline, "not {want} in time: {f}");
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }
}

fn jwt_sub(token: &str) -> String {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["sub"].as_str().unwrap().to_string()
}

fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, body) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(body.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

#[tokio::test]
#[ignore = "needs a cluster (KUBECONFIG)"]
async fn function_lifecycle_on_a_cluster() {
    let e = E2e::new();
    let kube = kube::Client::try_default().await.expect("KUBECONFIG");
    let dns = format!("sless-fn-{}", e.ns);
    let deps: Api<Deployment> = Api::namespaced(kube.clone(), &dns);
    let svcs: Api<Service> = Api::namespaced(kube, &dns);
    let name = format!("e2e-{}", std::process::id());
    let (s, b) = e
        .call(
            reqwest::Method::POST,
            &sless_wire::paths::functions(&e.ns),
            Some(json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler", "env_vars": {"GREETING": "hi"}})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let zip = zip_of(&[(
        "main.py",
        "import os\ndef handler(event, context):\n    return {'greeting': os.environ['GREETING']}\n",
    )]);
    let sha = hex::encode(Sha256::digest(&zip));
    let resp = e
        .http
        .put(format!(
            "{}{}?sha256={sha}",
            e.base,
            sless_wire::paths::function_code(&e.ns, &name)
        ))
        .bearer_auth(&e.token)
        .header("content-type", "application/zip")
        .body(zip)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let ready = e.wait_phase(&name, "Ready", Duration::from_secs(600)).await;
    let image = ready["status"]["image_ref"].as_str().unwrap().to_string();
    assert!(!image.ends_with(":latest"));

    let invoke = sless_wire::paths::function_invoke(&e.ns, &name);
    let (s, out) = e
        .call(reqwest::Method::POST, &invoke, Some(json!({})))
        .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["greeting"], "hi");

    // Env update: same image, new value.
    let (s, _) = e
        .call(
            reqwest::Method::PATCH,
            &sless_wire::paths::function(&e.ns, &name),
            Some(json!({"env_vars": {"GREETING": "hello"}})),
        )
        .await;
    assert_eq!(s, 200);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (s, out) = e
            .call(reqwest::Method::POST, &invoke, Some(json!({})))
            .await;
        if s == 200 && out["greeting"] == "hello" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "env update not applied: {s} {out}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let f = e.wait_phase(&name, "Ready", Duration::from_secs(60)).await;
    assert_eq!(
        f["status"]["image_ref"],
        image.as_str(),
        "no rebuild for an env change"
    );

    // A Deployment deleted by hand comes back.
    let dname = format!("fn-{name}");
    deps.delete(&dname, &Default::default()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(d) = deps.get_opt(&dname).await.unwrap()
            && d.metadata.deletion_timestamp.is_none()
        {
            break;
        }
        assert!(Instant::now() < deadline, "Deployment not recreated");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    // Delete: the children go too.
    let (s, _) = e
        .call(
            reqwest::Method::DELETE,
            &sless_wire::paths::function(&e.ns, &name),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let gone = deps.get_opt(&dname).await.unwrap().is_none()
            && svcs.get_opt(&dname).await.unwrap().is_none();
        let (s, _) = e
            .call(
                reqwest::Method::GET,
                &sless_wire::paths::function(&e.ns, &name),
                None,
            )
            .await;
        if gone && s == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "children not deleted");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
