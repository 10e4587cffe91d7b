//! The Kubernetes backend: the REST API's objects are custom resources
//! ([`crd`]) reconciled by kube-rs controllers ([`function`]); code goes to an
//! S3-compatible object store ([`objstore`]); triggers become Ingresses or
//! CronJobs ([`trigger`]); builds run as kaniko Jobs from a
//! context the operator prepares ([`context`]); every child object comes from
//! a pure builder ([`builders`]) and is named by [`names`]. The controllers
//! share their finalizer, status and watch scaffolding ([`controller_util`])
//! and run as one unit ([`controllers`]) while this replica holds the leader
//! Lease ([`leader`]). Functions scale to zero: the controller decides the
//! replicas ([`scale`]) from the activity the invoke proxy records
//! ([`activity`]), and a request for a function at zero waits for it
//! ([`activator`]). See `docs/kubernetes.md`.
//!
//! Children live in `sless-fn-<ns>`, not in the user namespace of their
//! owner, so they carry owner labels instead of owner references; controllers
//! watch them by label and delete them in their finalizers.

pub mod activator;
pub mod activity;
pub mod args;
pub mod backend;
pub mod build;
pub mod builders;
pub mod context;
pub mod controller_util;
pub mod controllers;
pub mod crd;
pub mod function;
pub mod job;
pub mod leader;
pub mod metrics;
pub mod names;
pub mod objstore;
pub mod scale;
pub mod service;
pub mod trigger;

pub use backend::KubeBackend;

/// The pinned kaniko image (the maintained fork; GoogleContainerTools/kaniko
/// is archived).
pub const KANIKO_IMAGE: &str = "ghcr.io/osscontainertools/kaniko:v1.28.0";

/// Settings of the object store holding code and build contexts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Options {
    /// Endpoint URL of an S3-compatible server (MinIO, ...); `None` = AWS.
    pub endpoint: Option<String>,
    /// The bucket.
    pub bucket: String,
    /// The region (any value for most S3-compatible servers).
    pub region: String,
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key (never logged).
    pub secret_access_key: String,
    /// Whether `http://` endpoints are allowed.
    pub allow_http: bool,
}

/// How http triggers are exposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressOptions {
    /// The host of every http trigger's Ingress rule (`None`: any host).
    pub host: Option<String>,
    /// `ingressClassName` of the Ingresses.
    pub class: Option<String>,
    /// `https` or `http`, used in trigger URLs.
    pub scheme: String,
    /// Namespace of the ingress controller, admitted by the NetworkPolicy.
    pub controller_namespace: Option<String>,
}

/// Options of the Kubernetes backend (from `serve` flags / env).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeOptions {
    /// Image registry prefix, e.g. `registry.example.com/sless`.
    pub registry: String,
    /// Whether the registry speaks plain HTTP (kaniko `--insecure`).
    pub registry_insecure: bool,
    /// Name of a `kubernetes.io/dockerconfigjson` secret in the operator's
    /// namespace, copied into every deploy namespace as `sless-registry`.
    pub registry_secret: Option<String>,
    /// The namespace the operator runs in.
    pub operator_namespace: String,
    /// The operator's own Service in `operator_namespace`: http triggers of
    /// functions that scale to zero are routed through it.
    pub operator_service: String,
    /// The port of `operator_service`.
    pub operator_service_port: u16,
    /// Name of a secret in the operator's namespace with `AWS_ACCESS_KEY_ID`
    /// and `AWS_SECRET_ACCESS_KEY` for kaniko, copied into deploy namespaces.
    pub object_store_secret: String,
    /// The object store.
    pub s3: S3Options,
    /// Http trigger exposure.
    pub ingress: IngressOptions,
    /// The kaniko image.
    pub kaniko_image: String,
    /// Run the controllers only while holding the leader Lease (so several
    /// replicas can serve the API); off: run them at startup.
    pub leader_election: bool,
}

/// Errors of the Kubernetes backend's controllers.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// An API server call failed.
    #[error("kubernetes API: {0}")]
    Api(#[from] kube::Error),
    /// A finalizer step failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<KubeError>>),
    /// The object is missing a namespace or name (never for real objects).
    #[error("object has no {0}")]
    Incomplete(&'static str),
    /// The object store failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
}

impl KubeOptions {
    /// Example options (used by tests and shown in the docs): a registry
    /// with a pull secret, an S3-compatible endpoint, an nginx ingress on
    /// `fn.example.test`, the operator in `sless-system`.
    pub fn example() -> KubeOptions {
        KubeOptions {
            registry: "registry.test".into(),
            registry_insecure: false,
            registry_secret: Some("regcred".into()),
            operator_namespace: "sless-system".into(),
            operator_service: "sless-operator".into(),
            operator_service_port: 80,
            object_store_secret: "sless-s3".into(),
            s3: S3Options {
                endpoint: Some("http://minio.sless-system:9000".into()),
                bucket: "sless-code".into(),
                region: "us-east-1".into(),
                access_key_id: "test".into(),
                secret_access_key: "test-secret".into(),
                allow_http: true,
            },
            ingress: IngressOptions {
                host: Some("fn.example.test".into()),
                class: Some("nginx".into()),
                scheme: "https".into(),
                controller_namespace: Some("ingress-nginx".into()),
            },
            kaniko_image: KANIKO_IMAGE.into(),
            leader_election: true,
        }
    }
}

/// [`KubeOptions::example`], for unit tests.
#[cfg(test)]
pub fn test_options() -> KubeOptions {
    KubeOptions::example()
}
