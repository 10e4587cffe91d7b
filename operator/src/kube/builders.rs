//! Pure builders of every child object the controllers apply: the kaniko
//! build Job, the workload Deployment and Service, the http trigger's
//! Service and Ingress, the cron trigger's CronJob, the FunctionJob's runtime
//! Job, and the deploy namespace with its NetworkPolicy. No I/O; each is
//! unit-tested for what matters (pinned images, sorted env, limits, labels).

use super::KubeOptions;
use super::context::server_command;
use super::crd::SecretEnvRef;
use super::names::{self, OwnerKind, RUNTIME_PORT};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, KeyToPath, LocalObjectReference, Namespace, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, Secret, SecretKeySelector, SecretVolumeSource,
    SecurityContext, Service, ServicePort, ServiceSpec, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicySpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sless_wire::Runtime;
use sless_wire::validate::FieldError;
use std::collections::BTreeMap;

/// The curl image cron jobs call functions with (pinned, never `latest`).
pub const CURL_IMAGE: &str = "curlimages/curl:8.5.0";
/// Name of the registry pull/push secret inside each deploy namespace.
pub const REGISTRY_SECRET: &str = "sless-registry";
/// Name of the object-store credentials secret inside each deploy namespace.
pub const OBJECT_STORE_SECRET: &str = "sless-object-store";
/// Name of the default-deny NetworkPolicy in each deploy namespace.
pub const NETWORK_POLICY: &str = "sless-default-deny";
/// Longest a kaniko build may run.
pub const BUILD_DEADLINE_SECONDS: i64 = 900;
/// How long finished build and job runs are kept (their logs are read from them).
pub const FINISHED_TTL_SECONDS: i32 = 3600;
/// Marker line the runtime Job prints before its result JSON.
pub const RESULT_MARKER: &str = "SLESS_RESULT_JSON";

/// What a Deployment or runtime Job runs: the parts of a function, service or
/// job spec a workload needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload<'a> {
    /// Kind of the owner.
    pub kind: OwnerKind,
    /// The owner's (user) namespace.
    pub namespace: &'a str,
    /// The owner's name.
    pub name: &'a str,
    /// Runtime.
    pub runtime: Runtime,
    /// `module.function`.
    pub entrypoint: &'a str,
    /// User environment.
    pub env_vars: &'a BTreeMap<String, String>,
    /// Names and hash of the secret environment (values in [`env_secret`]).
    pub secret_env_vars: &'a SecretEnvRef,
    /// Memory limit in MiB.
    pub memory_mb: u32,
    /// Timeout in seconds.
    pub timeout_sec: u32,
    /// The image to run.
    pub image: &'a str,
}

fn meta(name: &str, ns: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(ns.to_string()),
        labels: Some(labels),
        ..Default::default()
    }
}

fn app_selector(kind: OwnerKind, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(
        names::APP_LABEL.to_string(),
        names::workload_name(kind, name),
    )])
}

fn pod_labels(kind: OwnerKind, ns: &str, name: &str) -> BTreeMap<String, String> {
    let mut l = names::owner_labels(kind, ns, name);
    l.extend(app_selector(kind, name));
    l
}

/// The environment of a workload container, sorted by name: the user's
/// variables plus the runtime's `SLESS_*` ones (which win on a clash).
pub fn workload_env(w: &Workload<'_>) -> Vec<EnvVar> {
    let mut env: BTreeMap<String, String> = w.env_vars.clone();
    for (k, v) in [
        ("SLESS_ENTRYPOINT", w.entrypoint.to_string()),
        ("SLESS_FUNCTION", w.name.to_string()),
        ("SLESS_NAMESPACE", w.namespace.to_string()),
        ("SLESS_CODE_DIR", "/code".to_string()),
        ("SLESS_HOST", "0.0.0.0".to_string()),
        ("SLESS_PORT", RUNTIME_PORT.to_string()),
        ("SLESS_TIMEOUT_SEC", w.timeout_sec.to_string()),
        ("SLESS_MEMORY_MB", w.memory_mb.to_string()),
    ] {
        env.insert(k.to_string(), v);
    }
    with_secret_env(w, env)
}

/// `env` as plain variables plus one `secretKeyRef` per secret env name (to
/// the workload's [`env_secret`]), sorted by name. Secret names never clash
/// with the others (validated in the wire crate).
fn with_secret_env(w: &Workload<'_>, env: BTreeMap<String, String>) -> Vec<EnvVar> {
    let secret = names::env_secret_name(w.kind, w.name);
    let mut out: Vec<EnvVar> = env
        .into_iter()
        .map(|(name, value)| EnvVar {
            name,
            value: Some(value),
            ..Default::default()
        })
        .collect();
    out.extend(w.secret_env_vars.names.iter().map(|k| EnvVar {
        name: k.clone(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.clone(),
                key: k.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Pod annotation holding the secret env hash: a new value changes the pod
/// template, so the Deployment rolls out pods that read it.
pub const SECRET_HASH_ANNOTATION: &str = "sless.kube5s.ru/secret-env-hash";

/// The Secret with a workload's `secret_env_vars` values, in the deploy
/// namespace with the owner labels; the containers reference it by key.
pub fn env_secret(
    kind: OwnerKind,
    ns: &str,
    name: &str,
    values: &BTreeMap<String, String>,
) -> Secret {
    Secret {
        metadata: meta(
            &names::env_secret_name(kind, name),
            &names::deploy_namespace(ns),
            names::owner_labels(kind, ns, name),
        ),
        type_: Some("Opaque".to_string()),
        data: Some(
            values
                .iter()
                .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn memory(mb: u32) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("memory".to_string(), Quantity(format!("{mb}Mi")))])
}

fn restricted_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        run_as_non_root: Some(true),
        run_as_user: Some(65532),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pull_secrets(opts: &KubeOptions) -> Option<Vec<LocalObjectReference>> {
    opts.registry_secret.as_ref().map(|_| {
        vec![LocalObjectReference {
            name: REGISTRY_SECRET.to_string(),
        }]
    })
}

fn workload_container(w: &Workload<'_>) -> Container {
    Container {
        name: "function".to_string(),
        image: Some(w.image.to_string()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(server_command(w.runtime)),
        working_dir: Some("/code".to_string()),
        env: Some(workload_env(w)),
        resources: Some(ResourceRequirements {
            limits: Some(memory(w.memory_mb)),
            requests: Some({
                let mut r = memory(w.memory_mb);
                r.insert("cpu".to_string(), Quantity("50m".to_string()));
                r
            }),
            ..Default::default()
        }),
        security_context: Some(restricted_security()),
        ..Default::default()
    }
}

/// The Deployment serving a function or service: `replicas` (0 or 1: a
/// function scaled to zero has 0, see [`super::scale`]) of the runtime
/// server in serve mode, a memory limit of `memory_mb`, a TCP readiness probe
/// on the runtime port (the server binds only after the entrypoint loaded),
/// owner labels (never owner references: the owner is in another namespace).
pub fn deployment(opts: &KubeOptions, w: &Workload<'_>, replicas: i32) -> Deployment {
    let deploy_ns = names::deploy_namespace(w.namespace);
    let name = names::workload_name(w.kind, w.name);
    let labels = pod_labels(w.kind, w.namespace, w.name);
    let mut container = workload_container(w);
    container.ports = Some(vec![ContainerPort {
        name: Some("http".to_string()),
        container_port: RUNTIME_PORT,
        protocol: Some("TCP".to_string()),
        ..Default::default()
    }]);
    let tcp = || TCPSocketAction {
        port: IntOrString::Int(RUNTIME_PORT),
        ..Default::default()
    };
    container.readiness_probe = Some(Probe {
        tcp_socket: Some(tcp()),
        period_seconds: Some(2),
        failure_threshold: Some(3),
        ..Default::default()
    });
    container.liveness_probe = Some(Probe {
        tcp_socket: Some(tcp()),
        initial_delay_seconds: Some(30),
        period_seconds: Some(10),
        failure_threshold: Some(6),
        ..Default::default()
    });
    Deployment {
        metadata: meta(&name, &deploy_ns, labels.clone()),
        spec: DeploymentSpec {
            replicas: Some(replicas),
            revision_history_limit: Some(2),
            selector: LabelSelector {
                match_labels: Some(app_selector(w.kind, w.name)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: (!w.secret_env_vars.is_empty()).then(|| {
                        BTreeMap::from([(
                            SECRET_HASH_ANNOTATION.to_string(),
                            w.secret_env_vars.hash.clone(),
                        )])
                    }),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    image_pull_secrets: pull_secrets(opts),
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    termination_grace_period_seconds: Some(10),
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The Deployment of a sless Service: the user's own server (`script` run by
/// the runtime's interpreter, or `command`), `PORT` set to the runtime port,
/// an HTTP readiness probe on `health_path`; otherwise like [`deployment`]
/// (memory limit, sorted env, owner labels, pull secret), always one replica.
pub fn service_deployment(
    opts: &KubeOptions,
    w: &Workload<'_>,
    command: &[String],
    health_path: &str,
) -> Deployment {
    let mut d = deployment(opts, w, 1);
    if let Some(c) = d
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|p| p.containers.first_mut())
    {
        c.command = Some(if command.is_empty() {
            match w.runtime.language() {
                sless_wire::runtime::Language::Python => {
                    vec!["python3".into(), "-u".into(), w.entrypoint.to_string()]
                }
                sless_wire::runtime::Language::Node => {
                    vec!["node".into(), w.entrypoint.to_string()]
                }
            }
        } else {
            command.to_vec()
        });
        let mut env: BTreeMap<String, String> = w.env_vars.clone();
        env.insert("PORT".into(), RUNTIME_PORT.to_string());
        c.env = Some(with_secret_env(w, env));
        c.readiness_probe = Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some(health_path.to_string()),
                port: IntOrString::Int(RUNTIME_PORT),
                ..Default::default()
            }),
            period_seconds: Some(2),
            failure_threshold: Some(3),
            ..Default::default()
        });
    }
    d
}

/// The ClusterIP Service in front of a workload's pods, port 80 → runtime port.
pub fn workload_service(kind: OwnerKind, ns: &str, name: &str) -> Service {
    let svc_name = names::workload_name(kind, name);
    Service {
        metadata: meta(
            &svc_name,
            &names::deploy_namespace(ns),
            names::owner_labels(kind, ns, name),
        ),
        spec: Some(ServiceSpec {
            selector: Some(app_selector(kind, name)),
            ports: Some(vec![ServicePort {
                name: Some("http".to_string()),
                port: 80,
                target_port: Some(IntOrString::Int(RUNTIME_PORT)),
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The in-cluster URL of a workload's Service.
pub fn service_url(kind: OwnerKind, ns: &str, name: &str) -> String {
    format!(
        "http://{}.{}.svc.cluster.local",
        names::workload_name(kind, name),
        names::deploy_namespace(ns)
    )
}

/// The kaniko Job building `image` from the context at `code_key` in the
/// object store. Runs once (`backoffLimit: 0`), bounded in time, cleaned up
/// after an hour, pushes with the registry secret mounted as
/// `/kaniko/.docker/config.json`, writes the digest to the termination log.
pub fn kaniko_job(
    opts: &KubeOptions,
    kind: OwnerKind,
    ns: &str,
    name: &str,
    tag: &str,
    code_key: &str,
    image: &str,
) -> Job {
    let job_name = names::build_job_name(kind, name, tag);
    let mut labels = names::owner_labels(kind, ns, name);
    labels.insert("sless.kube5s.ru/build-tag".to_string(), tag.to_string());
    let mut args = vec![
        format!("--context=s3://{}/{}", opts.s3.bucket, code_key),
        "--dockerfile=Dockerfile".to_string(),
        format!("--destination={image}"),
        "--digest-file=/dev/termination-log".to_string(),
        "--cleanup".to_string(),
    ];
    if opts.registry_insecure {
        args.push("--insecure".to_string());
    }
    let secret_env = |env: &str, key: &str| EnvVar {
        name: env.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: OBJECT_STORE_SECRET.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let plain_env = |n: &str, v: &str| EnvVar {
        name: n.to_string(),
        value: Some(v.to_string()),
        ..Default::default()
    };
    let mut env = vec![
        plain_env("AWS_REGION", &opts.s3.region),
        secret_env("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
        secret_env("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
    ];
    if let Some(endpoint) = &opts.s3.endpoint {
        env.push(plain_env("S3_ENDPOINT", endpoint));
        env.push(plain_env("S3_FORCE_PATH_STYLE", "true"));
    }
    env.sort_by(|a, b| a.name.cmp(&b.name));
    let (volumes, mounts) = match &opts.registry_secret {
        Some(_) => (
            Some(vec![Volume {
                name: "docker-config".to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(REGISTRY_SECRET.to_string()),
                    items: Some(vec![KeyToPath {
                        key: ".dockerconfigjson".to_string(),
                        path: "config.json".to_string(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            Some(vec![VolumeMount {
                name: "docker-config".to_string(),
                mount_path: "/kaniko/.docker".to_string(),
                read_only: Some(true),
                ..Default::default()
            }]),
        ),
        None => (None, None),
    };
    Job {
        metadata: meta(&job_name, &names::deploy_namespace(ns), labels.clone()),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(BUILD_DEADLINE_SECONDS),
            ttl_seconds_after_finished: Some(FINISHED_TTL_SECONDS),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    automount_service_account_token: Some(false),
                    containers: vec![Container {
                        name: "kaniko".to_string(),
                        image: Some(opts.kaniko_image.clone()),
                        args: Some(args),
                        env: Some(env),
                        volume_mounts: mounts,
                        resources: Some(ResourceRequirements {
                            limits: Some(memory(2048)),
                            requests: Some(memory(512)),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    volumes,
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The ConfigMap holding a FunctionJob run's input (`event.json`); it can
/// hold up to 1 MiB, far above the job input limit.
pub fn job_input_config_map(ns: &str, name: &str, run_name: &str, input: &str) -> ConfigMap {
    ConfigMap {
        metadata: meta(
            run_name,
            &names::deploy_namespace(ns),
            names::owner_labels(OwnerKind::FunctionJob, ns, name),
        ),
        data: Some(BTreeMap::from([(
            "event.json".to_string(),
            input.to_string(),
        )])),
        ..Default::default()
    }
}

/// The Job running a FunctionJob's entrypoint once (the runtime's `--once`
/// mode) with the input from [`job_input_config_map`]; after the user's own
/// output it prints [`RESULT_MARKER`] and the result JSON, which the
/// controller reads from the pod log.
pub fn runtime_job(opts: &KubeOptions, w: &Workload<'_>, run_name: &str) -> Job {
    let labels = names::owner_labels(w.kind, w.namespace, w.name);
    let mut container = workload_container(w);
    let server = server_command(w.runtime).join(" ");
    container.command = Some(vec!["/bin/sh".to_string(), "-c".to_string()]);
    container.args = Some(vec![format!(
        "{server} --once /input/event.json /tmp/result.json; rc=$?; echo; echo {RESULT_MARKER}; cat /tmp/result.json 2>/dev/null; exit $rc"
    )]);
    container.volume_mounts = Some(vec![VolumeMount {
        name: "input".to_string(),
        mount_path: "/input".to_string(),
        read_only: Some(true),
        ..Default::default()
    }]);
    Job {
        metadata: meta(
            run_name,
            &names::deploy_namespace(w.namespace),
            labels.clone(),
        ),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(i64::from(w.timeout_sec) + 60),
            ttl_seconds_after_finished: Some(FINISHED_TTL_SECONDS),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    automount_service_account_token: Some(false),
                    image_pull_secrets: pull_secrets(opts),
                    containers: vec![container],
                    volumes: Some(vec![Volume {
                        name: "input".to_string(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: run_name.to_string(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where an http trigger's Ingress sends requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpRoute {
    /// To the function's pods (a Service beside them): `min_instances = 1`.
    Direct,
    /// To the operator's Service, whose proxy wakes a function at zero:
    /// `min_instances = 0`.
    ViaOperator,
}

impl HttpRoute {
    /// The route for a function with `min_instances`.
    pub fn for_min_instances(min_instances: u32) -> HttpRoute {
        if min_instances >= 1 {
            HttpRoute::Direct
        } else {
            HttpRoute::ViaOperator
        }
    }
}

fn trigger_ingress(
    opts: &KubeOptions,
    metadata: ObjectMeta,
    path: String,
    service: &str,
    port: i32,
) -> Ingress {
    Ingress {
        metadata,
        spec: Some(IngressSpec {
            ingress_class_name: opts.ingress.class.clone(),
            rules: Some(vec![IngressRule {
                host: opts.ingress.host.clone(),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some(path),
                        path_type: "Prefix".to_string(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: service.to_string(),
                                port: Some(ServiceBackendPort {
                                    number: Some(port),
                                    ..Default::default()
                                }),
                            }),
                            ..Default::default()
                        },
                    }],
                }),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The name of an http trigger's Ingress in the operator's namespace
/// ([`HttpRoute::ViaOperator`]): `tr-<ns>-<trigger>` (Ingresses of every
/// user namespace share that namespace).
pub fn operator_ingress_name(ns: &str, trigger: &str) -> String {
    format!("tr-{ns}-{trigger}")
}

/// The Ingress of an http trigger routed through the operator
/// ([`HttpRoute::ViaOperator`]): in the operator's namespace (an Ingress
/// can only name a Service of its own namespace), same host and path as
/// [`http_trigger`], backend the operator's Service (`--operator-service`,
/// `--operator-service-port`), which serves `/<ns>/<trigger>` like
/// `/t/<ns>/<trigger>`. Owner labels as every child.
pub fn operator_trigger_ingress(opts: &KubeOptions, ns: &str, trigger: &str) -> Ingress {
    trigger_ingress(
        opts,
        meta(
            &operator_ingress_name(ns, trigger),
            &opts.operator_namespace,
            names::owner_labels(OwnerKind::Trigger, ns, trigger),
        ),
        trigger_path(ns, trigger),
        &opts.operator_service,
        i32::from(opts.operator_service_port),
    )
}

/// An http trigger's Service (selecting its function's pods) and Ingress
/// (host and path prefix from the operator options: `/<ns>/<trigger>`),
/// both in the deploy namespace ([`HttpRoute::Direct`]).
pub fn http_trigger(
    opts: &KubeOptions,
    ns: &str,
    trigger: &str,
    function: &str,
) -> (Service, Ingress) {
    let svc_name = names::workload_name(OwnerKind::Trigger, trigger);
    let deploy_ns = names::deploy_namespace(ns);
    let labels = names::owner_labels(OwnerKind::Trigger, ns, trigger);
    let mut svc = workload_service(OwnerKind::Function, ns, function);
    svc.metadata = meta(&svc_name, &deploy_ns, labels.clone());
    let ingress = trigger_ingress(
        opts,
        meta(&svc_name, &deploy_ns, labels),
        trigger_path(ns, trigger),
        &svc_name,
        80,
    );
    (svc, ingress)
}

/// `/<ns>/<trigger>`, the path an http trigger is served under.
pub fn trigger_path(ns: &str, trigger: &str) -> String {
    format!("/{ns}/{trigger}")
}

/// The public URL of an http trigger.
pub fn trigger_url(opts: &KubeOptions, ns: &str, trigger: &str) -> String {
    let host = opts.ingress.host.as_deref().unwrap_or("localhost");
    format!(
        "{}://{host}{}",
        opts.ingress.scheme,
        trigger_path(ns, trigger)
    )
}

/// The time zone cron schedules are read in (the local backend's too; the
/// trigger's `nextRunAt` is computed in it).
pub const CRON_TIME_ZONE: &str = "Etc/UTC";

/// The CronJob form of a (validated) trigger schedule. A CronJob takes five
/// fields (minute resolution), while the API also accepts six with leading
/// seconds (the local backend runs them at second resolution): six fields
/// whose seconds field is exactly `0` become the equivalent five, any other
/// six-field schedule is refused, naming `schedule`. Five-field schedules
/// and nicknames (`@hourly`) are kept as written (trimmed). The trigger's
/// spec keeps the schedule as the user wrote it; only the CronJob differs.
pub fn cron_job_schedule(schedule: &str) -> Result<String, FieldError> {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    match fields.as_slice() {
        [seconds, rest @ ..] if rest.len() == 5 => {
            if *seconds == "0" {
                Ok(rest.join(" "))
            } else {
                Err(FieldError::invalid(
                    "schedule",
                    format!(
                        "{schedule:?} has a seconds field ({seconds:?}), but the Kubernetes backend runs cron triggers at minute resolution: use five fields \"minute hour day-of-month month day-of-week\", or 0 as the seconds field (other seconds need the local backend)"
                    ),
                ))
            }
        }
        _ => Ok(schedule.trim().to_string()),
    }
}

/// A cron trigger's CronJob beside the function: a pinned curl POSTs the
/// payload to the function's Service; never two runs at once. The schedule
/// is read in UTC and converted by [`cron_job_schedule`] (an error when
/// Kubernetes cannot run it); the Jobs it spawns carry the trigger's owner
/// labels (the trigger controller watches them to record runs).
pub fn cron_job(
    ns: &str,
    trigger: &str,
    function: &str,
    schedule: &str,
    payload: Option<&str>,
    suspend: bool,
) -> Result<CronJob, FieldError> {
    let schedule = cron_job_schedule(schedule)?;
    let name = names::workload_name(OwnerKind::Trigger, trigger);
    let mut labels = names::owner_labels(OwnerKind::Trigger, ns, trigger);
    let job_labels = labels.clone();
    let mut pod_labels = labels.clone();
    pod_labels.insert(names::CALLER_LABEL.to_string(), "true".to_string());
    labels.insert(names::CALLER_LABEL.to_string(), "true".to_string());
    let url = format!("{}/", service_url(OwnerKind::Function, ns, function));
    Ok(CronJob {
        metadata: meta(&name, &names::deploy_namespace(ns), labels),
        spec: CronJobSpec {
            schedule,
            time_zone: Some(CRON_TIME_ZONE.to_string()),
            concurrency_policy: Some("Forbid".to_string()),
            suspend: Some(suspend),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(job_labels),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(0),
                    ttl_seconds_after_finished: Some(FINISHED_TTL_SECONDS),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(pod_labels),
                            ..Default::default()
                        }),
                        spec: Some(PodSpec {
                            restart_policy: Some("Never".to_string()),
                            automount_service_account_token: Some(false),
                            containers: vec![Container {
                                name: "call".to_string(),
                                image: Some(CURL_IMAGE.to_string()),
                                args: Some(vec![
                                    "-fsS".to_string(),
                                    "--max-time".to_string(),
                                    "900".to_string(),
                                    "-X".to_string(),
                                    "POST".to_string(),
                                    "-H".to_string(),
                                    "content-type: application/json".to_string(),
                                    "--data".to_string(),
                                    payload.unwrap_or("null").to_string(),
                                    url,
                                ]),
                                security_context: Some(restricted_security()),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    })
}

/// A deploy namespace `sless-fn-<ns>`, labelled with its user namespace.
pub fn deploy_namespace(ns: &str) -> Namespace {
    let mut labels = BTreeMap::from([(names::MANAGED_BY.to_string(), names::MANAGER.to_string())]);
    labels.insert(names::OWNER_NAMESPACE.to_string(), ns.to_string());
    Namespace {
        metadata: ObjectMeta {
            name: Some(names::deploy_namespace(ns)),
            labels: Some(labels),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A user namespace (where the custom resources live).
pub fn user_namespace(ns: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(ns.to_string()),
            labels: Some(BTreeMap::from([(
                names::MANAGED_BY.to_string(),
                names::MANAGER.to_string(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The deploy namespace's NetworkPolicy: every ingress is denied except to
/// workload pods from the operator's namespace (the invoke proxy), from
/// caller pods of this namespace (cron jobs) and from the ingress
/// controller's namespace (http triggers). Egress stays open (builds fetch
/// dependencies; functions may call out).
pub fn network_policy(opts: &KubeOptions, ns: &str) -> NetworkPolicy {
    let ns_peer = |name: &str| NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                name.to_string(),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut from = vec![
        ns_peer(&opts.operator_namespace),
        NetworkPolicyPeer {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    names::CALLER_LABEL.to_string(),
                    "true".to_string(),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    if let Some(ingress_ns) = &opts.ingress.controller_namespace {
        from.push(ns_peer(ingress_ns));
    }
    let mut labels = BTreeMap::from([(names::MANAGED_BY.to_string(), names::MANAGER.to_string())]);
    labels.insert(names::OWNER_NAMESPACE.to_string(), ns.to_string());
    NetworkPolicy {
        metadata: meta(NETWORK_POLICY, &names::deploy_namespace(ns), labels),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(vec!["Ingress".to_string()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::test_options;

    fn env() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("ZED".to_string(), "z".to_string()),
            ("ALPHA".to_string(), "a".to_string()),
            ("MIDDLE".to_string(), "m".to_string()),
        ])
    }

    static NO_SECRETS: SecretEnvRef = SecretEnvRef {
        names: Vec::new(),
        hash: String::new(),
    };

    fn workload(env: &BTreeMap<String, String>) -> Workload<'_> {
        Workload {
            kind: OwnerKind::Function,
            namespace: "sless-0123abcd",
            name: "hello",
            runtime: Runtime::Python311,
            entrypoint: "main.handler",
            env_vars: env,
            secret_env_vars: &NO_SECRETS,
            memory_mb: 256,
            timeout_sec: 30,
            image: "registry.test/sless-0123abcd/hello:0123456789ab",
        }
    }

    #[test]
    fn secret_env_vars_are_secret_key_refs_and_a_pod_annotation_never_values() {
        let e = env();
        let values = BTreeMap::from([("API_KEY".to_string(), "hunter2".to_string())]);
        let secrets = SecretEnvRef::from(&sless_wire::SecretEnv::from_values(&values));
        let w = Workload {
            secret_env_vars: &secrets,
            ..workload(&e)
        };
        let d = deployment(&test_options(), &w, 1);
        let text = serde_json::to_string(&d).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        let template = d.spec.template;
        let ann = template.metadata.unwrap().annotations.unwrap();
        assert_eq!(ann[SECRET_HASH_ANNOTATION], secrets.hash);
        let env = template.spec.unwrap().containers[0].env.clone().unwrap();
        let names_: Vec<&str> = env.iter().map(|v| v.name.as_str()).collect();
        let mut sorted = names_.clone();
        sorted.sort();
        assert_eq!(names_, sorted, "env stays sorted");
        let key = env.iter().find(|v| v.name == "API_KEY").unwrap();
        assert!(key.value.is_none());
        let r = key
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref())
            .unwrap();
        assert_eq!(r.name, "fn-hello-env");
        assert_eq!(r.key, "API_KEY");
        // The runtime Job of a job reads it the same way.
        let job_env = workload_env(&Workload {
            kind: OwnerKind::FunctionJob,
            ..w.clone()
        });
        let k = job_env.iter().find(|v| v.name == "API_KEY").unwrap();
        let r = k
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(r.name, "job-hello-env");
        // The Secret: owner labels, the deploy namespace, the value as data.
        let sec = env_secret(OwnerKind::Function, "sless-0123abcd", "hello", &values);
        assert_eq!(sec.metadata.name.as_deref(), Some("fn-hello-env"));
        assert_eq!(
            sec.metadata.namespace.as_deref(),
            Some("sless-fn-sless-0123abcd")
        );
        assert_eq!(sec.metadata.labels.unwrap()[names::OWNER_NAME], "hello");
        assert_eq!(sec.data.unwrap()["API_KEY"].0, b"hunter2");
        // Without secrets: no annotation.
        let plain = deployment(&test_options(), &workload(&e), 1);
        assert!(plain.spec.template.metadata.unwrap().annotations.is_none());
    }

    #[test]
    fn deployment_has_sorted_env_entrypoint_memory_probe_and_labels() {
        let e = env();
        let d = deployment(&test_options(), &workload(&e), 1);
        assert_eq!(d.metadata.name.as_deref(), Some("fn-hello"));
        assert_eq!(
            d.metadata.namespace.as_deref(),
            Some("sless-fn-sless-0123abcd")
        );
        assert!(
            d.metadata.owner_references.is_none(),
            "no cross-namespace owner refs"
        );
        let labels = d.metadata.labels.clone().unwrap();
        assert_eq!(labels[names::OWNER_NAMESPACE], "sless-0123abcd");
        assert_eq!(labels[names::OWNER_NAME], "hello");
        assert_eq!(labels[names::OWNER_KIND], "Function");
        let spec = d.spec;
        let pod = spec.template.spec.unwrap();
        let c = &pod.containers[0];
        let names_: Vec<&str> = c
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        let mut sorted = names_.clone();
        sorted.sort();
        assert_eq!(names_, sorted, "env must be sorted");
        let get = |k: &str| {
            c.env
                .as_ref()
                .unwrap()
                .iter()
                .find(|v| v.name == k)
                .and_then(|v| v.value.clone())
        };
        assert_eq!(get("SLESS_ENTRYPOINT").as_deref(), Some("main.handler"));
        assert_eq!(get("ALPHA").as_deref(), Some("a"));
        assert_eq!(get("SLESS_PORT").as_deref(), Some("8080"));
        let res = c.resources.as_ref().unwrap();
        assert_eq!(
            res.limits.as_ref().unwrap()["memory"],
            Quantity("256Mi".into())
        );
        let probe = c
            .readiness_probe
            .as_ref()
            .unwrap()
            .tcp_socket
            .as_ref()
            .unwrap();
        assert_eq!(probe.port, IntOrString::Int(8080));
        assert_eq!(
            c.image.as_deref(),
            Some("registry.test/sless-0123abcd/hello:0123456789ab")
        );
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, REGISTRY_SECRET);
        assert_eq!(
            spec.selector.match_labels.unwrap()[names::APP_LABEL],
            "fn-hello"
        );
        // Same input, same object: re-applying never restarts pods.
        let e2: BTreeMap<String, String> = env().into_iter().rev().collect();
        assert_eq!(
            deployment(&test_options(), &workload(&e), 1),
            deployment(&test_options(), &workload(&e2), 1)
        );
    }

    #[test]
    fn deployment_has_the_replicas_asked_and_only_they_differ() {
        let e = env();
        let one = deployment(&test_options(), &workload(&e), 1);
        let zero = deployment(&test_options(), &workload(&e), 0);
        assert_eq!(one.spec.replicas, Some(1));
        assert_eq!(zero.spec.replicas, Some(0));
        // Scaling changes nothing else: the pod template (hence the
        // ReplicaSet) stays, so scaling up runs the same pods as before.
        let mut back = zero.clone();
        back.spec.replicas = Some(1);
        assert_eq!(back, one);
        // A sless Service always runs one.
        let mut w = workload(&e);
        w.kind = OwnerKind::Service;
        let svc = service_deployment(&test_options(), &w, &[], "/");
        assert_eq!(svc.spec.replicas, Some(1));
    }

    #[test]
    fn http_route_follows_min_instances() {
        assert_eq!(HttpRoute::for_min_instances(0), HttpRoute::ViaOperator);
        assert_eq!(HttpRoute::for_min_instances(1), HttpRoute::Direct);
    }

    #[test]
    fn operator_trigger_ingress_points_at_the_operator_service() {
        let o = test_options();
        let ing = operator_trigger_ingress(&o, "sless-1", "web");
        assert_eq!(ing.metadata.name.as_deref(), Some("tr-sless-1-web"));
        assert_eq!(ing.metadata.namespace.as_deref(), Some("sless-system"));
        let labels = ing.metadata.labels.clone().unwrap();
        assert_eq!(
            names::owner_of(&labels),
            Some(("sless-1".to_string(), "web".to_string()))
        );
        assert_eq!(labels[names::OWNER_KIND], "Trigger");
        let spec = ing.spec.unwrap();
        assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
        let rule = &spec.rules.unwrap()[0];
        assert_eq!(rule.host.as_deref(), Some("fn.example.test"));
        let path = &rule.http.as_ref().unwrap().paths[0];
        // Same public path as the direct route: the URL does not change.
        assert_eq!(path.path.as_deref(), Some("/sless-1/web"));
        assert_eq!(path.path_type, "Prefix");
        let backend = path.backend.service.as_ref().unwrap();
        assert_eq!(backend.name, "sless-operator");
        assert_eq!(backend.port.as_ref().unwrap().number, Some(80));
        let mut o = test_options();
        o.operator_service = "sless-api".into();
        o.operator_service_port = 8080;
        o.operator_namespace = "platform".into();
        let ing = operator_trigger_ingress(&o, "sless-1", "web");
        assert_eq!(ing.metadata.namespace.as_deref(), Some("platform"));
        let b = ing.spec.unwrap().rules.unwrap()[0]
            .http
            .as_ref()
            .unwrap()
            .paths[0]
            .backend
            .service
            .clone()
            .unwrap();
        assert_eq!(
            (b.name.as_str(), b.port.unwrap().number),
            ("sless-api", Some(8080))
        );
    }

    #[test]
    fn service_deployment_runs_the_script_with_port_and_health_probe() {
        let e = env();
        let mut w = workload(&e);
        w.kind = OwnerKind::Service;
        w.entrypoint = "app.py";
        let d = service_deployment(&test_options(), &w, &[], "/healthz");
        assert_eq!(d.metadata.name.as_deref(), Some("svc-hello"));
        let c = &d.spec.template.spec.unwrap().containers[0];
        assert_eq!(c.command.clone().unwrap(), ["python3", "-u", "app.py"]);
        let names_: Vec<&str> = c
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(names_, ["ALPHA", "MIDDLE", "PORT", "ZED"]);
        let probe = c
            .readiness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap();
        assert_eq!(probe.path.as_deref(), Some("/healthz"));
        assert_eq!(probe.port, IntOrString::Int(8080));
        assert_eq!(
            c.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"],
            Quantity("256Mi".into())
        );
        let cmd = vec!["gunicorn".to_string(), "app:app".to_string()];
        let d = service_deployment(&test_options(), &w, &cmd, "/");
        assert_eq!(
            d.spec.template.spec.unwrap().containers[0]
                .command
                .clone()
                .unwrap(),
            cmd
        );
    }

    #[test]
    fn service_targets_the_runtime_port() {
        let s = workload_service(OwnerKind::Function, "sless-1", "hello");
        let spec = s.spec.unwrap();
        assert_eq!(
            spec.ports.unwrap()[0].target_port,
            Some(IntOrString::Int(8080))
        );
        assert_eq!(spec.selector.unwrap()[names::APP_LABEL], "fn-hello");
        assert_eq!(s.metadata.namespace.as_deref(), Some("sless-fn-sless-1"));
        assert_eq!(
            service_url(OwnerKind::Function, "sless-1", "hello"),
            "http://fn-hello.sless-fn-sless-1.svc.cluster.local"
        );
    }

    #[test]
    fn kaniko_job_is_pinned_once_bounded_and_pushes_the_tag() {
        let o = test_options();
        let j = kaniko_job(
            &o,
            OwnerKind::Function,
            "sless-1",
            "hello",
            "0123456789ab",
            "code/sless-1/abc.python3.11.tar.gz",
            "registry.test/sless-1/hello:0123456789ab",
        );
        assert_eq!(j.metadata.name.as_deref(), Some("build-hello-0123456789ab"));
        assert_eq!(j.metadata.namespace.as_deref(), Some("sless-fn-sless-1"));
        let spec = j.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        assert!(spec.active_deadline_seconds.is_some());
        assert!(spec.ttl_seconds_after_finished.is_some());
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        let c = &pod.containers[0];
        let image = c.image.as_deref().unwrap();
        assert!(
            image.starts_with("ghcr.io/osscontainertools/kaniko:v"),
            "{image}"
        );
        assert!(!image.ends_with("latest"));
        let args = c.args.clone().unwrap();
        assert!(
            args.contains(&"--destination=registry.test/sless-1/hello:0123456789ab".to_string())
        );
        assert!(
            args.contains(
                &"--context=s3://sless-code/code/sless-1/abc.python3.11.tar.gz".to_string()
            )
        );
        assert!(args.contains(&"--dockerfile=Dockerfile".to_string()));
        let mount = &c.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.mount_path, "/kaniko/.docker");
        let vol = &pod.volumes.unwrap()[0];
        let secret = vol.secret.as_ref().unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some(REGISTRY_SECRET));
        assert_eq!(secret.items.as_ref().unwrap()[0].path, "config.json");
        let env: Vec<&str> = c
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert!(env.contains(&"S3_ENDPOINT") && env.contains(&"AWS_SECRET_ACCESS_KEY"));
        let secret_env = c
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == "AWS_SECRET_ACCESS_KEY")
            .unwrap();
        assert!(
            secret_env.value.is_none(),
            "credentials come from a secret, never inline"
        );
    }

    #[test]
    fn runtime_job_runs_once_with_input_and_marker() {
        let e = env();
        let mut w = workload(&e);
        w.kind = OwnerKind::FunctionJob;
        let j = runtime_job(&test_options(), &w, "run-hello-3");
        let spec = j.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        assert_eq!(spec.active_deadline_seconds, Some(90));
        let pod = spec.template.spec.unwrap();
        let c = &pod.containers[0];
        let script = &c.args.as_ref().unwrap()[0];
        assert!(
            script.contains("python3 -u /sless/server.py --once /input/event.json"),
            "{script}"
        );
        assert!(script.contains(RESULT_MARKER));
        assert_eq!(
            pod.volumes.unwrap()[0].config_map.as_ref().unwrap().name,
            "run-hello-3"
        );
        assert!(
            c.env
                .as_ref()
                .unwrap()
                .iter()
                .any(|v| v.name == "SLESS_ENTRYPOINT")
        );
        let cm = job_input_config_map("sless-1", "hello", "run-hello-3", "{\"a\":1}");
        assert_eq!(cm.data.unwrap()["event.json"], "{\"a\":1}");
    }

    #[test]
    fn http_trigger_routes_host_and_path_to_the_function_pods() {
        let o = test_options();
        let (svc, ing) = http_trigger(&o, "sless-1", "web", "hello");
        assert_eq!(svc.metadata.name.as_deref(), Some("tr-web"));
        assert_eq!(
            svc.spec.unwrap().selector.unwrap()[names::APP_LABEL],
            "fn-hello"
        );
        let rule = &ing.spec.as_ref().unwrap().rules.as_ref().unwrap()[0];
        assert_eq!(rule.host.as_deref(), Some("fn.example.test"));
        let path = &rule.http.as_ref().unwrap().paths[0];
        assert_eq!(path.path.as_deref(), Some("/sless-1/web"));
        assert_eq!(path.backend.service.as_ref().unwrap().name, "tr-web");
        assert_eq!(
            ing.spec.unwrap().ingress_class_name.as_deref(),
            Some("nginx")
        );
        assert_eq!(
            trigger_url(&o, "sless-1", "web"),
            "https://fn.example.test/sless-1/web"
        );
        assert_eq!(ing.metadata.labels.unwrap()[names::OWNER_KIND], "Trigger");
    }

    #[test]
    fn cron_job_uses_pinned_curl_and_forbids_overlap() {
        let c = cron_job(
            "sless-1",
            "tick",
            "hello",
            "*/5 * * * *",
            Some("{\"x\":1}"),
            false,
        )
        .unwrap();
        assert_eq!(c.metadata.namespace.as_deref(), Some("sless-fn-sless-1"));
        let spec = c.spec;
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
        assert_eq!(spec.schedule, "*/5 * * * *");
        assert_eq!(spec.time_zone.as_deref(), Some("Etc/UTC"));
        // The Jobs carry the owner labels: the trigger controller watches them.
        let job_labels = spec.job_template.metadata.unwrap().labels.unwrap();
        assert_eq!(
            names::owner_of(&job_labels),
            Some(("sless-1".to_string(), "tick".to_string()))
        );
        assert_eq!(job_labels[names::OWNER_KIND], "Trigger");
        let pod = spec.job_template.spec.unwrap().template;
        assert_eq!(
            pod.metadata.unwrap().labels.unwrap()[names::CALLER_LABEL],
            "true"
        );
        let ctr = &pod.spec.unwrap().containers[0];
        assert_eq!(ctr.image.as_deref(), Some("curlimages/curl:8.5.0"));
        let args = ctr.args.clone().unwrap();
        assert!(args.contains(&"{\"x\":1}".to_string()));
        assert_eq!(
            args.last().unwrap(),
            "http://fn-hello.sless-fn-sless-1.svc.cluster.local/"
        );
    }

    #[test]
    fn six_field_schedules_with_zero_seconds_become_five_fields() {
        for (given, cron_job) in [
            ("*/5 * * * *", "*/5 * * * *"),
            ("0 0 * * FRI", "0 0 * * FRI"),
            ("@hourly", "@hourly"),
            ("  */5 * * * *  ", "*/5 * * * *"),
            ("0 */5 * * * *", "*/5 * * * *"),
            ("0 0 9-17 * * 1-5", "0 9-17 * * 1-5"),
            ("0  30\t2 * *   SUN", "30 2 * * SUN"),
        ] {
            assert_eq!(
                cron_job_schedule(given).as_deref(),
                Ok(cron_job),
                "{given:?}"
            );
        }
    }

    #[test]
    fn other_six_field_schedules_are_refused_naming_the_schedule() {
        for given in [
            "*/10 * * * * *",
            "30 * * * * *",
            "00 */5 * * * *",
            "0,30 * * * * *",
        ] {
            let err = cron_job_schedule(given).unwrap_err();
            assert_eq!(err.field, "schedule", "{given:?}");
            assert!(!err.missing);
            assert!(
                err.message.contains("minute resolution"),
                "{given:?}: {}",
                err.message
            );
            let e = cron_job("sless-1", "tick", "hello", given, None, false).unwrap_err();
            assert_eq!(e, err, "the builder refuses it too");
        }
    }

    #[test]
    fn cron_job_gets_the_five_field_form_of_a_zero_seconds_schedule() {
        let c = cron_job("sless-1", "tick", "hello", "0 */5 * * * *", None, true).unwrap();
        let spec = c.spec;
        assert_eq!(spec.schedule, "*/5 * * * *");
        assert_eq!(spec.suspend, Some(true));
    }

    #[test]
    fn network_policy_denies_by_default_but_admits_proxy_and_cron() {
        let p = network_policy(&test_options(), "sless-1");
        assert_eq!(p.metadata.namespace.as_deref(), Some("sless-fn-sless-1"));
        let spec = p.spec.unwrap();
        assert_eq!(
            spec.pod_selector,
            Some(LabelSelector::default()),
            "applies to every pod"
        );
        assert_eq!(spec.policy_types.unwrap(), vec!["Ingress"]);
        let from = spec.ingress.unwrap()[0].from.clone().unwrap();
        let ns_names: Vec<String> = from
            .iter()
            .filter_map(|p| p.namespace_selector.as_ref())
            .map(|s| s.match_labels.as_ref().unwrap()["kubernetes.io/metadata.name"].clone())
            .collect();
        assert_eq!(ns_names, vec!["sless-system", "ingress-nginx"]);
        assert!(from.iter().any(|p| {
            p.pod_selector
                .as_ref()
                .is_some_and(|s| s.match_labels.as_ref().unwrap()[names::CALLER_LABEL] == "true")
        }));
        assert_eq!(
            deploy_namespace("sless-1").metadata.name.as_deref(),
            Some("sless-fn-sless-1")
        );
    }
}
