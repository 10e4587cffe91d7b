//! Naming rules of the objects the Kubernetes backend creates: deploy
//! namespaces, image tags, child names and owner labels. Pure functions.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Prefix of the namespace a user namespace's workloads run in.
pub const DEPLOY_NS_PREFIX: &str = "sless-fn-";
/// Label marking every object the operator manages.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY`].
pub const MANAGER: &str = "sless-operator";
/// Label with the owner's kind (`Function`, `Trigger`, `FunctionJob`, `Service`).
pub const OWNER_KIND: &str = "sless.kube5s.ru/owner-kind";
/// Label with the owner's namespace (children live in another namespace).
pub const OWNER_NAMESPACE: &str = "sless.kube5s.ru/owner-namespace";
/// Label with the owner's name.
pub const OWNER_NAME: &str = "sless.kube5s.ru/owner-name";
/// Label on workload pods selecting them for their Service.
pub const APP_LABEL: &str = "sless.kube5s.ru/app";
/// Label on pods that call functions (cron jobs), allowed by the NetworkPolicy.
pub const CALLER_LABEL: &str = "sless.kube5s.ru/caller";
/// Field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "sless-operator";
/// The port the runtime server listens on inside the container.
pub const RUNTIME_PORT: i32 = 8080;

/// `sless-fn-<ns>`: where a user namespace's deployments, jobs and cron jobs run.
pub fn deploy_namespace(user_ns: &str) -> String {
    format!("{DEPLOY_NS_PREFIX}{user_ns}")
}

/// The user namespace of a deploy namespace, if it is one.
pub fn user_namespace(deploy_ns: &str) -> Option<&str> {
    deploy_ns.strip_prefix(DEPLOY_NS_PREFIX)
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// The image tag of a code key: the first 12 hex characters of its sha256.
pub fn image_tag(code_key: &str) -> String {
    sha256_hex(code_key)[..12].to_string()
}

/// `<registry>/<ns>/<name>:<tag>`; never `latest`.
pub fn image_ref(registry: &str, user_ns: &str, name: &str, tag: &str) -> String {
    format!("{}/{user_ns}/{name}:{tag}", registry.trim_end_matches('/'))
}

/// `<prefix>-<name>` cut to at most 63 characters; a cut name gets an 8-hex
/// hash of the full name so two long names cannot collide.
pub fn child_name(prefix: &str, name: &str, max: usize) -> String {
    let full = format!("{prefix}-{name}");
    if full.len() <= max {
        return full;
    }
    let hash = &sha256_hex(&full)[..8];
    let keep = max.saturating_sub(hash.len() + 1);
    let cut: String = full.chars().take(keep).collect();
    format!("{}-{hash}", cut.trim_end_matches('-'))
}

/// Name of the Secret with a workload's `secret_env_vars` values in the
/// deploy namespace: `<workload name>-env`.
pub fn env_secret_name(kind: OwnerKind, name: &str) -> String {
    format!("{}-env", workload_name(kind, name))
}

/// Name of a function's (or service's) Deployment and Service: `fn-<name>`
/// or `svc-<name>`.
pub fn workload_name(kind: OwnerKind, name: &str) -> String {
    let prefix = match kind {
        OwnerKind::Function => "fn",
        OwnerKind::Service => "svc",
        OwnerKind::Trigger => "tr",
        OwnerKind::FunctionJob => "job",
    };
    child_name(prefix, name, 63)
}

/// Name of the kaniko Job building `tag` for `name`: `build-<name>-<tag>`
/// (at most 63 characters: Job names become pod labels).
pub fn build_job_name(kind: OwnerKind, name: &str, tag: &str) -> String {
    let prefix = match kind {
        OwnerKind::Service => "build-svc",
        OwnerKind::FunctionJob => "build-job",
        _ => "build",
    };
    let base = child_name(prefix, name, 63 - tag.len() - 1);
    format!("{base}-{tag}")
}

/// The kind of a child's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    /// A `Function`.
    Function,
    /// A `Trigger`.
    Trigger,
    /// A `FunctionJob`.
    FunctionJob,
    /// A sless `Service`.
    Service,
}

impl OwnerKind {
    /// The custom resource kind.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::Function => "Function",
            OwnerKind::Trigger => "Trigger",
            OwnerKind::FunctionJob => "FunctionJob",
            OwnerKind::Service => "Service",
        }
    }
}

/// The labels of a child of `kind` `ns/name`.
pub fn owner_labels(kind: OwnerKind, ns: &str, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.to_string(), MANAGER.to_string()),
        (OWNER_KIND.to_string(), kind.as_str().to_string()),
        (OWNER_NAMESPACE.to_string(), ns.to_string()),
        (OWNER_NAME.to_string(), name.to_string()),
    ])
}

/// A label selector matching every child of one owner.
pub fn owner_selector(kind: OwnerKind, ns: &str, name: &str) -> String {
    owner_labels(kind, ns, name)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label selector matching every child of one kind of owner.
pub fn kind_selector(kind: OwnerKind) -> String {
    format!("{MANAGED_BY}={MANAGER},{OWNER_KIND}={}", kind.as_str())
}

/// The owner (namespace, name) a child's labels point at.
pub fn owner_of(labels: &BTreeMap<String, String>) -> Option<(String, String)> {
    Some((
        labels.get(OWNER_NAMESPACE)?.clone(),
        labels.get(OWNER_NAME)?.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploy_namespace_round_trips() {
        assert_eq!(
            deploy_namespace("sless-0123abcd"),
            "sless-fn-sless-0123abcd"
        );
        assert_eq!(
            user_namespace("sless-fn-sless-0123abcd"),
            Some("sless-0123abcd")
        );
        assert_eq!(user_namespace("kube-system"), None);
    }

    #[test]
    fn tag_is_first_12_hex_of_sha256_of_the_key_never_latest() {
        // sha256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(image_tag("abc"), "ba7816bf8f01");
        let r = image_ref("registry.local:5000/", "sless-1", "hello", &image_tag("k"));
        assert!(r.starts_with("registry.local:5000/sless-1/hello:"));
        assert!(!r.ends_with(":latest"));
        assert_eq!(r.rsplit(':').next().unwrap().len(), 12);
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let long = "a".repeat(63);
        let job = build_job_name(OwnerKind::Function, &long, "0123456789ab");
        assert!(job.len() <= 63, "{job}");
        assert!(job.starts_with("build-aaa") && job.ends_with("-0123456789ab"));
        let other = build_job_name(OwnerKind::Function, &"a".repeat(62), "0123456789ab");
        assert_ne!(job, other);
        assert_eq!(build_job_name(OwnerKind::Function, "hi", "t"), "build-hi-t");
        assert_eq!(workload_name(OwnerKind::Function, "hi"), "fn-hi");
        assert!(workload_name(OwnerKind::Function, &long).len() <= 63);
    }

    #[test]
    fn owner_labels_and_selector() {
        let l = owner_labels(OwnerKind::Function, "sless-1", "hello");
        assert_eq!(owner_of(&l), Some(("sless-1".into(), "hello".into())));
        assert_eq!(
            owner_selector(OwnerKind::Function, "sless-1", "hello"),
            "app.kubernetes.io/managed-by=sless-operator,sless.kube5s.ru/owner-kind=Function,sless.kube5s.ru/owner-name=hello,sless.kube5s.ru/owner-namespace=sless-1"
        );
    }
}
