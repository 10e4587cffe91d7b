//! Whole flows of the Kubernetes backend through the real operator binary:
//! REST calls in, controllers reconciling against the in-memory fake API
//! server (`fake_kube`), code in a real S3 server (moto). The test plays the
//! cluster's part: it marks kaniko and runtime Jobs finished, Deployments
//! available, and gives pods their logs. What a user would notice is
//! asserted through the REST API (phases, messages, URLs); what the cluster
//! would run is asserted on the stored children.
//!
//! The exact requests of each reconcile are pinned by `kube_*_controller`
//! (scripted mock); this suite proves the pieces work together: watches
//! wake the right controller, finalizers let deletes finish, the build guard
//! holds across an operator restart.

mod fake_kube;
mod moto;
mod support;

use fake_kube::operator::{KubeOperator, REGISTRY};
use fake_kube::{FakeKube, Key};
use reqwest::Method;
use serde_json::{Value, json};
use sless_operator::kube::names::{self, OwnerKind};
use sless_wire::paths;
use std::time::{Duration, Instant};
use support::{Client, zip_of};

const WAIT: Duration = Duration::from_secs(30);

/// Polls `GET path` until `ok` holds, panicking with the last answer.
async fn rest_until(c: &Client, path: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, body) = c.call(Method::GET, path, None).await;
        if code == 200 && ok(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: not {what} after {WAIT:?}; last {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until `path` answers 404.
async fn rest_gone(c: &Client, path: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, body) = c.call(Method::GET, path, None).await;
        if code == 404 {
            return;
        }
        assert!(Instant::now() < deadline, "{path} still {code} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn phase_is(p: &'static str) -> impl Fn(&Value) -> bool {
    move |v| v["status"]["phase"] == p
}

/// Children of one owner of `kind` (`api`/`plural`) in the deploy namespace.
fn children(
    fake: &FakeKube,
    api: &str,
    plural: &str,
    owner: OwnerKind,
    ns: &str,
    name: &str,
) -> Vec<Value> {
    fake.list(api, plural, Some(&names::deploy_namespace(ns)))
        .into_iter()
        .filter(|o| {
            let l = &o["metadata"]["labels"];
            l[names::OWNER_KIND] == owner.as_str()
                && l[names::OWNER_NAME] == name
                && l[names::OWNER_NAMESPACE] == ns
        })
        .collect()
}

fn key_of(api: &str, plural: &str, obj: &Value) -> Key {
    Key::new(
        api,
        plural,
        obj["metadata"]["namespace"].as_str().unwrap_or(""),
        obj["metadata"]["name"].as_str().unwrap_or(""),
    )
}

/// Waits for exactly one kaniko Job of an owner other than `except`; returns it.
async fn build_job(
    k: &KubeOperator,
    owner: OwnerKind,
    ns: &str,
    name: &str,
    except: &[String],
) -> Value {
    k.fake
        .wait_for("a kaniko build Job", WAIT, |f| {
            children(f, "batch/v1", "jobs", owner, ns, name)
                .into_iter()
                .find(|j| {
                    let n = j["metadata"]["name"].as_str().unwrap_or("");
                    n.starts_with("build") && !except.iter().any(|e| e == n)
                })
        })
        .await
}

fn build_jobs(k: &KubeOperator, owner: OwnerKind, ns: &str, name: &str) -> Vec<String> {
    children(&k.fake, "batch/v1", "jobs", owner, ns, name)
        .into_iter()
        .filter_map(|j| j["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n.starts_with("build"))
        .collect()
}

/// Plays the Job controller: the Job's pod ran to success (or failure).
fn finish_job(fake: &FakeKube, job: &Value, ok: bool) {
    let status = if ok {
        json!({"succeeded": 1, "completionTime": "2026-12-02T10:00:00Z",
               "conditions": [{"type": "Complete", "status": "True"}]})
    } else {
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True",
               "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]})
    };
    fake.set_status(&key_of("batch/v1", "jobs", job), status);
}

/// Plays the Deployment controller and kubelet: the current generation is
/// rolled out and available.
fn make_available(fake: &FakeKube, deployment: &Value) {
    let key = key_of("apps/v1", "deployments", deployment);
    let generation = fake
        .get(&key)
        .and_then(|d| d["metadata"]["generation"].as_i64())
        .unwrap_or(1);
    fake.set_status(
        &key,
        json!({"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
               "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": null}),
    );
}

async fn deployment(k: &KubeOperator, owner: OwnerKind, ns: &str, name: &str) -> Value {
    let want = names::workload_name(owner, name);
    k.fake
        .wait_for("the Deployment", WAIT, |f| {
            f.get(&Key::new(
                "apps/v1",
                "deployments",
                &names::deploy_namespace(ns),
                &want,
            ))
        })
        .await
}

fn env_of(deployment: &Value) -> Vec<(String, String)> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .map(|env| {
            env.iter()
                .filter_map(|e| {
                    Some((
                        e["name"].as_str()?.to_string(),
                        e["value"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_function_builds_once_rolls_out_updates_in_place_heals_and_deletes() {
    let Some(mut k) = fake_kube::operator::start().await else {
        return;
    };
    let c = k.op.client("flow-fn@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let fpath = paths::function(&ns, "hello");
    let (code, body) = c
        .create(
            json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler",
                       "env_vars": {"GREETING": "hi"}}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    rest_until(&c, &fpath, "waiting for code", |f| {
        f["status"]["phase"] == "Pending" && f["status"]["message"].as_str().is_some()
    })
    .await;
    assert!(
        build_jobs(&k, OwnerKind::Function, &ns, "hello").is_empty(),
        "no build without code"
    );

    let zip = zip_of(&[("main.py", "def handler(event, context):\n    return 'hi'\n")]);
    let (code, uploaded) = c.upload("hello", zip.clone()).await;
    assert!((200..300).contains(&code), "{code} {uploaded}");
    let job = build_job(&k, OwnerKind::Function, &ns, "hello", &[]).await;
    let args = job["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    let prefix = format!("{REGISTRY}/{ns}/hello:");
    assert!(args.contains(&format!("--destination={prefix}")), "{args}");
    assert!(
        args.contains("s3://sless-code/"),
        "the context comes from S3: {args}"
    );
    rest_until(&c, &fpath, "Building", phase_is("Building")).await;

    finish_job(&k.fake, &job, true);
    let d = deployment(&k, OwnerKind::Function, &ns, "hello").await;
    let image = d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        image.starts_with(&prefix) && !image.ends_with(":latest"),
        "{image}"
    );
    let env = env_of(&d);
    assert!(env.contains(&("GREETING".into(), "hi".into())), "{env:?}");
    assert!(
        env.contains(&("SLESS_ENTRYPOINT".into(), "main.handler".into())),
        "{env:?}"
    );
    let svc_key = Key::new(
        "v1",
        "services",
        &names::deploy_namespace(&ns),
        &names::workload_name(OwnerKind::Function, "hello"),
    );
    k.fake
        .wait_for("the function's Service", WAIT, |f| f.get(&svc_key))
        .await;
    let (_, f) = c.get("hello").await;
    assert_ne!(f["status"]["phase"], "Ready", "not before the rollout: {f}");

    make_available(&k.fake, &d);
    let ready = rest_until(&c, &fpath, "Ready", phase_is("Ready")).await;
    assert_eq!(ready["status"]["image_ref"], image, "{ready}");

    // An env update patches the Deployment in place: no second build.
    let (code, body) = c
        .call(
            Method::PATCH,
            &fpath,
            Some(json!({"env_vars": {"GREETING": "hello"}, "memory_mb": 256})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let d = k
        .fake
        .wait_for("the Deployment with the new env", WAIT, |f| {
            f.get(&key_of("apps/v1", "deployments", &d))
                .filter(|d| env_of(d).contains(&("GREETING".into(), "hello".into())))
        })
        .await;
    let limits = &d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
    assert_eq!(limits["memory"], "256Mi", "{limits}");
    make_available(&k.fake, &d);
    rest_until(&c, &fpath, "Ready again", phase_is("Ready")).await;
    assert_eq!(build_jobs(&k, OwnerKind::Function, &ns, "hello").len(), 1);

    // A Deployment deleted by hand comes back.
    k.fake.remove(&key_of("apps/v1", "deployments", &d));
    let d = deployment(&k, OwnerKind::Function, &ns, "hello").await;
    assert!(env_of(&d).contains(&("GREETING".into(), "hello".into())));

    // The same code again, and an operator restart: still one build.
    let (code, _) = c.upload("hello", zip).await;
    assert!((200..300).contains(&code));
    k.op.stop();
    k.op.spawn();
    // The restarted operator listens on a new port.
    let c = k.op.client("flow-fn@example.com");
    make_available(&k.fake, &d);
    rest_until(&c, &fpath, "Ready after the restart", phase_is("Ready")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        build_jobs(&k, OwnerKind::Function, &ns, "hello").len(),
        1,
        "the build guard survives a restart"
    );

    // The controllers' metrics are served.
    let metrics = reqwest::get(c.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .unwrap_or_default();
    assert!(
        metrics.contains("sless_controllers_running 1\n")
            && metrics.contains("sless_reconciles_total{controller=\"function\"}"),
        "{metrics}"
    );

    // Delete: the finalizer removes the children, then the function goes.
    let (code, body) = c.call(Method::DELETE, &fpath, None).await;
    assert!(code == 204 || code == 202, "{code} {body}");
    rest_gone(&c, &fpath).await;
    assert!(k.fake.get(&svc_key).is_none(), "Service left behind");
    assert!(
        children(
            &k.fake,
            "apps/v1",
            "deployments",
            OwnerKind::Function,
            &ns,
            "hello"
        )
        .is_empty(),
        "Deployment left behind"
    );
    fake_kube::rbac::assert_covered(&k.fake);
}

#[tokio::test]
async fn a_failed_build_waits_for_new_code_and_delete_while_building_stops_it() {
    let Some(k) = fake_kube::operator::start().await else {
        return;
    };
    let c = k.op.client("flow-build@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let (code, _) = c
        .create(json!({"name": "broken", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201);
    let (code, _) = c.upload("broken", zip_of(&[("main.py", "x = (\n")])).await;
    assert!((200..300).contains(&code));
    let first = build_job(&k, OwnerKind::Function, &ns, "broken", &[]).await;
    finish_job(&k.fake, &first, false);
    let failed = rest_until(
        &c,
        &paths::function(&ns, "broken"),
        "Failed",
        phase_is("Failed"),
    )
    .await;
    assert!(
        failed["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("build")),
        "{failed}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        build_jobs(&k, OwnerKind::Function, &ns, "broken").len(),
        1,
        "a failed build is not retried with the same code"
    );
    let first_name = first["metadata"]["name"].as_str().unwrap_or("").to_string();
    let (code, _) = c
        .upload(
            "broken",
            zip_of(&[("main.py", "x = 1\ndef handler(e, c):\n    return x\n")]),
        )
        .await;
    assert!((200..300).contains(&code));
    let second = build_job(&k, OwnerKind::Function, &ns, "broken", &[first_name]).await;
    assert_ne!(second["metadata"]["name"], first["metadata"]["name"]);
    rest_until(
        &c,
        &paths::function(&ns, "broken"),
        "Building",
        phase_is("Building"),
    )
    .await;

    // Deleting while it builds: the build Job goes, nothing is deployed.
    let (code, body) = c
        .call(Method::DELETE, &paths::function(&ns, "broken"), None)
        .await;
    assert!(code == 204 || code == 202, "{code} {body}");
    rest_gone(&c, &paths::function(&ns, "broken")).await;
    k.fake
        .wait_for("the build Jobs deleted", WAIT, |f| {
            children(f, "batch/v1", "jobs", OwnerKind::Function, &ns, "broken")
                .is_empty()
                .then_some(())
        })
        .await;
    // Nothing was deployed, and nothing appears later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        children(
            &k.fake,
            "apps/v1",
            "deployments",
            OwnerKind::Function,
            &ns,
            "broken"
        )
        .is_empty()
    );
    fake_kube::rbac::assert_covered(&k.fake);
}

#[tokio::test]
async fn triggers_wait_for_their_function_then_get_a_cron_job_or_an_ingress() {
    let Some(k) = fake_kube::operator::start().await else {
        return;
    };
    let c = k.op.client("flow-trigger@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let (code, _) = c
        .create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201);
    let (code, t) = c
        .call(
            Method::POST,
            &paths::triggers(&ns),
            Some(json!({"name": "tick", "function": "f", "type": "cron",
                    "schedule": "*/5 * * * *", "payload": "{\"n\": 1}"})),
        )
        .await;
    assert_eq!(code, 201, "{t}");
    let (code, t) = c
        .call(
            Method::POST,
            &paths::triggers(&ns),
            Some(json!({"name": "web", "function": "f", "type": "http"})),
        )
        .await;
    assert_eq!(code, 201, "{t}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, tick) = c
        .call(Method::GET, &paths::trigger(&ns, "tick"), None)
        .await;
    assert_eq!(tick["status"]["phase"], "Waiting", "{tick}");
    assert!(
        children(
            &k.fake,
            "batch/v1",
            "cronjobs",
            OwnerKind::Trigger,
            &ns,
            "tick"
        )
        .is_empty(),
        "no CronJob before the function is Ready"
    );

    // The function becomes Ready; the triggers' requeue picks it up.
    let (code, _) = c
        .upload(
            "f",
            zip_of(&[("main.py", "def handler(e, c):\n    return 1\n")]),
        )
        .await;
    assert!((200..300).contains(&code));
    let job = build_job(&k, OwnerKind::Function, &ns, "f", &[]).await;
    finish_job(&k.fake, &job, true);
    let d = deployment(&k, OwnerKind::Function, &ns, "f").await;
    make_available(&k.fake, &d);

    let cron = k
        .fake
        .wait_for("the CronJob", Duration::from_secs(45), |f| {
            children(f, "batch/v1", "cronjobs", OwnerKind::Trigger, &ns, "tick")
                .into_iter()
                .next()
        })
        .await;
    assert_eq!(cron["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], "curlimages/curl:8.5.0");
    rest_until(
        &c,
        &paths::trigger(&ns, "tick"),
        "Active",
        phase_is("Active"),
    )
    .await;
    // The function scales to zero (min_instances 0, the default): its http
    // trigger is routed through the operator, from the operator's namespace.
    let ingress = k
        .fake
        .wait_for("the http trigger's Ingress", Duration::from_secs(45), |f| {
            f.list("networking.k8s.io/v1", "ingresses", Some("sless-system"))
                .into_iter()
                .find(|o| {
                    let l = &o["metadata"]["labels"];
                    l[names::OWNER_KIND] == OwnerKind::Trigger.as_str()
                        && l[names::OWNER_NAME] == "web"
                        && l[names::OWNER_NAMESPACE] == ns.as_str()
                })
        })
        .await;
    let path = &ingress["spec"]["rules"][0]["http"]["paths"][0];
    assert_eq!(path["path"], format!("/{ns}/web"));
    assert_eq!(path["backend"]["service"]["name"], "sless-operator");
    assert!(
        children(
            &k.fake,
            "networking.k8s.io/v1",
            "ingresses",
            OwnerKind::Trigger,
            &ns,
            "web"
        )
        .is_empty(),
        "no direct Ingress beside the pods"
    );
    let web = rest_until(
        &c,
        &paths::trigger(&ns, "web"),
        "Active",
        phase_is("Active"),
    )
    .await;
    assert!(
        web["status"]["url"]
            .as_str()
            .is_some_and(|u| u.contains(&ns) && u.contains("web")),
        "{web}"
    );

    // Deleting a trigger removes its CronJob.
    let (code, _) = c
        .call(Method::DELETE, &paths::trigger(&ns, "tick"), None)
        .await;
    assert!(code == 204 || code == 202);
    rest_gone(&c, &paths::trigger(&ns, "tick")).await;
    assert!(
        children(
            &k.fake,
            "batch/v1",
            "cronjobs",
            OwnerKind::Trigger,
            &ns,
            "tick"
        )
        .is_empty()
    );
    fake_kube::rbac::assert_covered(&k.fake);
}

#[tokio::test]
async fn a_function_job_puts_its_return_value_in_the_message() {
    let Some(k) = fake_kube::operator::start().await else {
        return;
    };
    let c = k.op.client("flow-job@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let deploy_ns = names::deploy_namespace(&ns);
    let jpath = paths::job(&ns, "sum");
    let (code, body) = c
        .call(
            Method::POST,
            &paths::jobs(&ns),
            Some(
                json!({"name": "sum", "runtime": "python3.11", "entrypoint": "main.handler",
                    "input": "{\"a\": 1, \"b\": 2}"}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let zip = zip_of(&[(
        "main.py",
        "def handler(event, context):\n    return {'sum': event['a'] + event['b']}\n",
    )]);
    let (code, body) = c.put_code(&paths::job_code(&ns, "sum"), zip).await;
    assert!((200..300).contains(&code), "{code} {body}");
    let generation = body["generation"].as_u64().unwrap_or(0);

    let build = build_job(&k, OwnerKind::FunctionJob, &ns, "sum", &[]).await;
    finish_job(&k.fake, &build, true);
    let run = k
        .fake
        .wait_for("the run Job", WAIT, |f| {
            children(f, "batch/v1", "jobs", OwnerKind::FunctionJob, &ns, "sum")
                .into_iter()
                .find(|j| {
                    !j["metadata"]["name"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with("build")
                })
        })
        .await;
    let run_name = run["metadata"]["name"].as_str().unwrap_or("").to_string();
    let (_, running) = c.call(Method::GET, &jpath, None).await;
    assert_eq!(running["status"]["phase"], "Running", "{running}");

    // The run's pod prints the user's output, then the result after the marker.
    let pod = format!("{run_name}-abcde");
    k.fake.put(
        "v1",
        "pods",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod, "namespace": deploy_ns, "labels": {"job-name": run_name}},
               "spec": {"containers": [{"name": "function", "image": "x"}]}}),
    );
    k.fake.set_log(
        &deploy_ns,
        &pod,
        &format!(
            "a user print\n\n{}\n{{\"ok\": true, \"result\": {{\"sum\": 3}}}}\n",
            sless_operator::kube::builders::RESULT_MARKER
        ),
    );
    finish_job(&k.fake, &run, true);
    let done = rest_until(&c, &jpath, "Succeeded", phase_is("Succeeded")).await;
    let message: Value = serde_json::from_str(done["status"]["message"].as_str().unwrap_or("null"))
        .unwrap_or(Value::Null);
    assert_eq!(message, json!({"sum": 3}), "{done}");
    assert_eq!(done["status"]["observed_generation"], generation, "{done}");

    let (code, _) = c.call(Method::DELETE, &jpath, None).await;
    assert!(code == 204 || code == 202);
    rest_gone(&c, &jpath).await;
    assert!(
        children(
            &k.fake,
            "batch/v1",
            "jobs",
            OwnerKind::FunctionJob,
            &ns,
            "sum"
        )
        .is_empty()
    );
    fake_kube::rbac::assert_covered(&k.fake);
}

#[tokio::test]
async fn a_service_rolls_out_and_takes_env_updates_in_place() {
    let Some(k) = fake_kube::operator::start().await else {
        return;
    };
    let c = k.op.client("flow-svc@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let spath = paths::service(&ns, "web");
    let (code, body) = c
        .call(
            Method::POST,
            &paths::services(&ns),
            Some(
                json!({"name": "web", "runtime": "nodejs20", "entrypoint": "server.js",
                    "env_vars": {"MODE": "a"}}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let zip = zip_of(&[(
        "server.js",
        "require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT);\n",
    )]);
    let (code, body) = c.put_code(&paths::service_code(&ns, "web"), zip).await;
    assert!((200..300).contains(&code), "{code} {body}");
    let build = build_job(&k, OwnerKind::Service, &ns, "web", &[]).await;
    finish_job(&k.fake, &build, true);
    let d = deployment(&k, OwnerKind::Service, &ns, "web").await;
    assert!(env_of(&d).contains(&("MODE".into(), "a".into())));
    make_available(&k.fake, &d);
    rest_until(&c, &spath, "Ready", phase_is("Ready")).await;

    let (code, body) = c
        .call(
            Method::PATCH,
            &spath,
            Some(json!({"env_vars": {"MODE": "b"}})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    k.fake
        .wait_for("the service Deployment with MODE=b", WAIT, |f| {
            f.get(&key_of("apps/v1", "deployments", &d))
                .filter(|d| env_of(d).contains(&("MODE".into(), "b".into())))
        })
        .await;
    assert_eq!(
        build_jobs(&k, OwnerKind::Service, &ns, "web").len(),
        1,
        "no rebuild"
    );
    let (code, _) = c.call(Method::DELETE, &spath, None).await;
    assert!(code == 204 || code == 202);
    rest_gone(&c, &spath).await;
    assert!(
        children(
            &k.fake,
            "apps/v1",
            "deployments",
            OwnerKind::Service,
            &ns,
            "web"
        )
        .is_empty()
    );
    fake_kube::rbac::assert_covered(&k.fake);
}

/// `secret_env_vars` on the Kubernetes backend: the values are in the
/// Secret `<workload>-env` of the deploy namespace (never in the custom
/// resource or an answer), the Deployment reads them by `secretKeyRef`, a new
/// value rolls the pods (template annotation) without a rebuild, and delete
/// removes the Secret.
#[tokio::test]
async fn secret_env_vars_are_a_secret_the_deployment_references() {
    let Some(k) = fake_kube::operator::start().await else {
        return;
    };
    let c = k.op.client("flow-secret@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let spath = paths::service(&ns, "vault");
    let (code, body) = c
        .call(
            Method::POST,
            &paths::services(&ns),
            Some(
                json!({"name": "vault", "runtime": "nodejs20", "entrypoint": "server.js",
                "env_vars": {"MODE": "a"}, "secret_env_vars": {"TOKEN": "hunter2"}}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    assert!(!body.to_string().contains("hunter2"), "{body}");
    let zip = zip_of(&[(
        "server.js",
        "require('http').createServer((q, s) => s.end(process.env.TOKEN)).listen(process.env.PORT);\n",
    )]);
    let (code, body) = c.put_code(&paths::service_code(&ns, "vault"), zip).await;
    assert!((200..300).contains(&code), "{code} {body}");
    let build = build_job(&k, OwnerKind::Service, &ns, "vault", &[]).await;
    finish_job(&k.fake, &build, true);
    let d = deployment(&k, OwnerKind::Service, &ns, "vault").await;
    let secret_name = names::env_secret_name(OwnerKind::Service, "vault");
    let token = d["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "TOKEN"))
        .cloned()
        .unwrap_or_else(|| panic!("no TOKEN in {d}"));
    assert_eq!(
        token["valueFrom"]["secretKeyRef"],
        json!({"name": secret_name, "key": "TOKEN", "optional": false})
    );
    let hash1 = d["spec"]["template"]["metadata"]["annotations"]
        [sless_operator::kube::builders::SECRET_HASH_ANNOTATION]
        .clone();
    assert_eq!(
        hash1,
        sless_wire::secret_hash(&[("TOKEN".to_string(), "hunter2".to_string())].into()).as_str()
    );
    let skey = Key::new("v1", "secrets", &names::deploy_namespace(&ns), &secret_name);
    let secret = k.fake.get(&skey).expect("the env Secret");
    assert_eq!(secret["data"]["TOKEN"], "aHVudGVyMg==", "{secret}");
    for cr in k
        .fake
        .list("sless.kube5s.ru/v1alpha1", "services", Some(&ns))
    {
        assert!(!cr.to_string().contains("hunter2"), "{cr}");
    }
    make_available(&k.fake, &d);
    let got = rest_until(&c, &spath, "Ready", phase_is("Ready")).await;
    assert!(!got.to_string().contains("hunter2"), "{got}");
    assert_eq!(got["spec"]["secret_env_vars"]["names"], json!(["TOKEN"]));

    // A new value: the Secret first, then pods rolled by the annotation.
    let (code, body) = c
        .call(
            Method::PATCH,
            &spath,
            Some(json!({"secret_env_vars": {"TOKEN": "swordfish"}})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        k.fake.get(&skey).expect("the env Secret")["data"]["TOKEN"],
        "c3dvcmRmaXNo"
    );
    k.fake
        .wait_for("the Deployment rolled for the new secret", WAIT, |f| {
            f.get(&key_of("apps/v1", "deployments", &d)).filter(|d| {
                d["spec"]["template"]["metadata"]["annotations"]
                    [sless_operator::kube::builders::SECRET_HASH_ANNOTATION]
                    != hash1
            })
        })
        .await;
    assert_eq!(
        build_jobs(&k, OwnerKind::Service, &ns, "vault").len(),
        1,
        "no rebuild"
    );
    let (code, _) = c.call(Method::DELETE, &spath, None).await;
    assert!(code == 204 || code == 202);
    rest_gone(&c, &spath).await;
    assert!(k.fake.get(&skey).is_none(), "the env Secret is deleted");
    fake_kube::rbac::assert_covered(&k.fake);
}

/// Whether the operator at `base_url` says it runs the controllers.
async fn runs_controllers(base_url: &str) -> bool {
    let text = match reqwest::get(format!("{base_url}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => return false,
    };
    text.contains("sless_controllers_running 1\n")
}

#[tokio::test]
async fn two_replicas_serve_the_api_and_one_at_a_time_runs_the_controllers() {
    let Some(mut k) = fake_kube::operator::start().await else {
        return;
    };
    let mut b = k.replica();
    let deadline = Instant::now() + WAIT;
    while !runs_controllers(&k.op.base_url).await {
        assert!(Instant::now() < deadline, "the first replica never led");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!runs_controllers(&b.base_url).await, "two leaders");

    // The follower serves the API; the leader's controllers act on it.
    let c = b.client("flow-replicas@example.com");
    c.ensure().await;
    let ns = c.namespace.clone();
    let (code, body) = c
        .create(json!({"name": "f", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, _) = c
        .upload(
            "f",
            zip_of(&[("main.py", "def handler(e, c):\n    return 1\n")]),
        )
        .await;
    assert!((200..300).contains(&code));
    let job = build_job(&k, OwnerKind::Function, &ns, "f", &[]).await;

    // The leader stops cleanly: the follower takes over and carries on.
    k.op.stop();
    let deadline = Instant::now() + WAIT;
    while !runs_controllers(&b.base_url).await {
        assert!(
            Instant::now() < deadline,
            "the second replica did not take over; its log:\n{}",
            b.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    finish_job(&k.fake, &job, true);
    let d = deployment(&k, OwnerKind::Function, &ns, "f").await;
    make_available(&k.fake, &d);
    rest_until(&c, &paths::function(&ns, "f"), "Ready", phase_is("Ready")).await;
    assert_eq!(build_jobs(&k, OwnerKind::Function, &ns, "f").len(), 1);
    b.stop();
    fake_kube::rbac::assert_covered(&k.fake);
}
