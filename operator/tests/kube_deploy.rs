//! The manifests under `deploy/`: the ClusterRole grants what the
//! controllers and the REST layer use and nothing wildcard; the operator
//! Deployment runs two replicas (leader election) with probes and resources.

use serde_json::Value;
use std::path::PathBuf;

fn docs(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    text.split("\n---\n")
        .filter(|d| d.contains("kind:"))
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect()
}

fn allows(rules: &[Value], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        let has = |key: &str, v: &str| r[key].as_array().is_some_and(|a| a.iter().any(|x| x == v));
        has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
    })
}

#[test]
fn cluster_role_covers_every_call_and_has_no_wildcards() {
    let all = docs("rbac.yaml");
    let role = all.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let rules = role["rules"].as_array().unwrap();
    let text = serde_json::to_string(rules).unwrap();
    assert!(!text.contains("\"*\""), "no wildcards: {text}");
    let needed = [
        (
            "sless.kube5s.ru",
            "functions",
            [
                "get", "list", "watch", "create", "update", "patch", "delete",
            ]
            .as_slice(),
        ),
        (
            "sless.kube5s.ru",
            "triggers",
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        (
            "sless.kube5s.ru",
            "functionjobs",
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        (
            "sless.kube5s.ru",
            "services",
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        ("sless.kube5s.ru", "functions/status", &["patch"]),
        ("sless.kube5s.ru", "triggers/status", &["patch"]),
        ("sless.kube5s.ru", "functionjobs/status", &["patch"]),
        ("sless.kube5s.ru", "services/status", &["patch"]),
        ("", "namespaces", &["get", "create", "patch"]),
        (
            "apps",
            "deployments",
            &["list", "watch", "create", "patch", "delete"],
        ),
        (
            "batch",
            "jobs",
            &[
                "get",
                "list",
                "watch",
                "create",
                "delete",
                "deletecollection",
            ],
        ),
        (
            "batch",
            "cronjobs",
            &["list", "watch", "create", "patch", "delete"],
        ),
        (
            "",
            "services",
            &["list", "watch", "create", "patch", "delete"],
        ),
        ("", "configmaps", &["create", "deletecollection"]),
        (
            "networking.k8s.io",
            "ingresses",
            &["list", "watch", "create", "patch", "delete"],
        ),
        ("networking.k8s.io", "networkpolicies", &["create", "patch"]),
        ("", "pods", &["list"]),
        ("", "pods/log", &["get"]),
        ("", "secrets", &["create", "patch"]),
        ("events.k8s.io", "events", &["create", "patch"]),
    ];
    for (group, resource, verbs) in needed {
        for verb in verbs {
            assert!(
                allows(rules, group, resource, verb),
                "ClusterRole lacks {verb} on {group}/{resource}"
            );
        }
    }
    assert!(
        !allows(rules, "", "secrets", "get"),
        "secrets are read only through the namespaced Role"
    );
    let secret_role = all.iter().find(|d| d["kind"] == "Role").unwrap();
    assert_eq!(secret_role["metadata"]["namespace"], "sless-system");
    assert_eq!(
        secret_role["rules"][0]["resourceNames"],
        serde_json::json!(["regcred", "sless-object-store"])
    );
}

#[test]
fn operator_runs_two_replicas_with_probes_and_resources() {
    let all = docs("operator.yaml");
    let d = all.iter().find(|d| d["kind"] == "Deployment").unwrap();
    // Several replicas are safe only with leader election (on by default)
    // and one token verifier for all (a JWKS, not per-pod local keys).
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "sless-operator");
    let c = &pod["containers"][0];
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "POD_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "the Lease holder identity comes from the pod name"
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"]["path"],
        sless_wire::paths::HEALTHZ
    );
    assert_eq!(
        c["livenessProbe"]["httpGet"]["path"],
        sless_wire::paths::HEALTHZ
    );
    assert!(c["resources"]["limits"]["memory"].is_string());
    // Prometheus scrapes /metrics on the container's port.
    let scrape = &d["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(scrape["prometheus.io/scrape"], "true");
    assert_eq!(scrape["prometheus.io/path"], sless_wire::paths::METRICS);
    assert_eq!(
        scrape["prometheus.io/port"].as_str(),
        c["ports"][0]["containerPort"]
            .as_u64()
            .map(|p| p.to_string())
            .as_deref()
    );
    let cm = all.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(cm["data"]["SLESS_BACKEND"], "kube");
    assert!(
        cm["data"]["SLESS_JWKS_URL"].is_string(),
        "replicas share a JWKS"
    );
    assert_ne!(cm["data"]["SLESS_LEADER_ELECTION"], "false");
    // Every setting in the ConfigMap is a flag `serve` knows.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_sless-operator"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for key in cm["data"].as_object().unwrap().keys() {
        assert!(help.contains(key.as_str()), "serve does not read {key}");
    }
}

/// `deploy/Dockerfile` builds the image `deploy/operator.yaml` runs: the
/// operator binary as the entrypoint, the same non-root user, a pinned
/// toolchain, `serve` as the default command.
#[test]
fn the_operator_image_matches_the_deployment() {
    let dockerfile = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/Dockerfile"),
    )
    .unwrap();
    let all = docs("operator.yaml");
    let d = all.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &d["spec"]["template"]["spec"];
    let uid = pod["securityContext"]["runAsUser"].as_u64().unwrap();
    assert!(
        dockerfile.contains(&format!("\nUSER {uid}:{uid}\n")),
        "the image's user is the Deployment's runAsUser {uid}"
    );
    assert!(dockerfile.contains("--locked -p sless-operator --bin sless-operator"));
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/local/bin/sless-operator\"]"));
    assert_eq!(pod["containers"][0]["args"], serde_json::json!(["serve"]));
    let from_rust = dockerfile
        .lines()
        .find(|l| l.starts_with("FROM docker.io/library/rust:"))
        .expect("a pinned rust builder image");
    assert!(
        !from_rust.contains(":latest") && from_rust.contains("rust:1."),
        "{from_rust}"
    );
    for line in dockerfile.lines().filter(|l| l.starts_with("FROM ")) {
        assert!(!line.contains(":latest"), "unpinned base image: {line}");
    }
}
