//! Checks the RBAC rules in `deploy/rbac.yaml` against the API requests the
//! operator really made to a [`FakeKube`]: a call the installed operator
//! would be forbidden to make fails the test, so the manifests cannot lag
//! behind the code.

use super::{ApiCall, FakeKube};
use serde_json::Value;
use std::collections::BTreeSet;

/// The ClusterRole's rules and the operator namespace's Role (namespace, rules).
fn roles() -> (Vec<Value>, String, Vec<Value>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/rbac.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/rbac.yaml");
    let docs: Vec<Value> = text
        .split("\n---\n")
        .filter(|d| d.contains("kind:"))
        .map(|d| serde_yaml::from_str(d).expect("rbac.yaml document"))
        .collect();
    let rules = |kind: &str| -> (String, Vec<Value>) {
        let doc = docs
            .iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in deploy/rbac.yaml"));
        (
            doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            doc["rules"].as_array().cloned().unwrap_or_default(),
        )
    };
    let (_, cluster) = rules("ClusterRole");
    let (ns, role) = rules("Role");
    (cluster, ns, role)
}

fn allows(rules: &[Value], call: &ApiCall) -> bool {
    let has =
        |r: &Value, key: &str, v: &str| r[key].as_array().is_some_and(|a| a.iter().any(|x| x == v));
    rules.iter().any(|r| {
        has(r, "apiGroups", &call.group)
            && has(r, "resources", &call.resource)
            && has(r, "verbs", &call.verb)
            && (r.get("resourceNames").is_none() || has(r, "resourceNames", &call.name))
    })
}

/// The calls in `calls` that neither the ClusterRole nor (in its namespace)
/// the Role allows, as `verb group/resource ns/name`.
pub fn forbidden(calls: &[ApiCall]) -> Vec<String> {
    let (cluster, role_ns, role) = roles();
    let mut out = BTreeSet::new();
    for c in calls {
        let ok = allows(&cluster, c) || (c.namespace == role_ns && allows(&role, c));
        if !ok {
            out.insert(format!(
                "{} {}/{} {}/{}",
                c.verb, c.group, c.resource, c.namespace, c.name
            ));
        }
    }
    out.into_iter().collect()
}

/// Panics unless deploy/rbac.yaml allowed every request `fake` served.
pub fn assert_covered(fake: &FakeKube) {
    let missing = forbidden(&fake.api_calls());
    assert!(
        missing.is_empty(),
        "deploy/rbac.yaml would forbid these calls the operator made: {missing:#?}"
    );
}
