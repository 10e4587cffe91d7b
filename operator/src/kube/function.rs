//! The Function controller. One reconcile per object (kube-rs runtime), a
//! finalizer for cleanup, server-side apply with the `sless-operator` field
//! manager and `force`, status patched only when it changed.
//!
//! The build state machine cannot loop: the image tag is derived from the
//! code key, the kaniko Job is named after it (`build-<fn>-<tag>`) and
//! created once; `status.build` records the tag and the build's outcome, so
//! the guard survives operator restarts. A failed build waits for new code.
//! A succeeded build is followed by the Deployment and Service in
//! `sless-fn-<ns>`; env, entrypoint and memory changes are re-applied to the
//! Deployment without a rebuild. Children carry owner labels and are watched,
//! so a Deployment deleted by hand is recreated; Ready functions are also
//! requeued every 60 s. Each deploy step also lists the function's pods
//! (no pod watch) and records their container restarts in `status.restarts`;
//! a restart makes the pod unready, which changes the Deployment's status,
//! so the watched Deployment brings the count up to date.
//!
//! Scale to zero: a Ready function with `min_instances = 0` whose last
//! activity (the `sless.kube5s.ru/last-request` annotation the invoke proxy
//! writes, or when it became Ready) is older than its idle timeout gets a
//! Deployment of 0 replicas ([`scale::desired_replicas`]), and is requeued
//! for the moment it becomes idle. It stays `Ready`, with `status.instances`
//! 0; the next request's activity (an annotation change, which this
//! controller watches) brings it back to one.
//!
//! It also holds what the other controllers use: their shared context
//! ([`Ctx`]), conditions, Job outcomes, and what functions and services
//! (both run by a Deployment) share: waiting for code, the rollout of the
//! Deployment and Service with readiness and restarts, and the cleanup.

use super::build::{self, Progress};
use super::builders::{self, Workload};
use super::controller_util::{
    Controlled, Reconciled, delete_all_if_present, delete_if_present, patch_status,
    reconcile_with_finalizer, status_changed,
};
use super::crd::{BuildState, CodeRef, Function, FunctionStatus};
use super::names::{self, FIELD_MANAGER, OwnerKind};
use super::scale;
use super::{KubeError, KubeOptions};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The finalizer on every Function.
pub const FINALIZER: &str = "sless.kube5s.ru/function-cleanup";
/// Requeue while a build runs (the Job watch usually comes first).
pub const REQUEUE_BUILDING: Duration = Duration::from_secs(10);
/// Requeue while the Deployment is not ready yet.
pub const REQUEUE_STARTING: Duration = Duration::from_secs(5);
/// Periodic requeue of Ready functions (self-healing).
pub const REQUEUE_READY: Duration = Duration::from_secs(60);

/// Shared state of the controllers.
pub struct Ctx {
    /// The API client.
    pub client: Client,
    /// Backend options.
    pub opts: KubeOptions,
    /// Publishes events on the custom resources.
    pub recorder: Recorder,
    /// Reconcile counters for `/metrics`.
    pub metrics: super::metrics::Metrics,
    /// Consecutive failures per object (for error backoff).
    failures: Mutex<HashMap<String, u32>>,
}

impl Ctx {
    /// A context for `client`.
    pub fn new(client: Client, opts: KubeOptions) -> Ctx {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: names::MANAGER.to_string(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        Ctx {
            client,
            opts,
            recorder,
            metrics: super::metrics::Metrics::default(),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn reset_failures(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }

    /// Backoff after a failed reconcile: 5 s doubling to at most 5 min.
    pub fn failure_backoff(&self, key: &str) -> Duration {
        let n = match self.failures.lock() {
            Ok(mut f) => {
                let n = f.entry(key.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        let secs = 5u64.saturating_mul(1 << n.min(6).saturating_sub(1));
        Duration::from_secs(secs.min(300))
    }

    /// Publishes an event on `obj` (failures are logged, never fatal).
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, "cannot publish an event");
        }
    }
}

impl Reconciled for Function {
    const CONTROLLER: &'static str = "function";
    const FINALIZER: &'static str = FINALIZER;
    const OWNER: OwnerKind = OwnerKind::Function;

    /// `<ns>/<name>` (the other kinds' keys start with their controller).
    fn failure_key(&self) -> String {
        format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }
}

/// Sets condition `type_` in `conds`, keeping its `lastTransitionTime` when
/// its status did not change.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) {
    let status_s = if status { "True" } else { "False" };
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status_s {
            c.last_transition_time = Time(Timestamp::now());
        }
        c.status = status_s.to_string();
        c.reason = reason.to_string();
        c.message = message.to_string();
        return;
    }
    conds.push(Condition {
        type_: type_.to_string(),
        status: status_s.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: Time(Timestamp::now()),
        observed_generation: None,
    });
}

/// Reconciles one Function (the finalizer wraps apply and cleanup).
pub async fn reconcile(f: Arc<Function>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    reconcile_with_finalizer(f, ctx, apply, cleanup).await
}

/// What to do after a failed reconcile: retry with a per-object backoff.
pub fn error_policy(f: Arc<Function>, err: &KubeError, ctx: Arc<Ctx>) -> Action {
    let key = f.failure_key();
    tracing::warn!(function = %key, error = %err, "reconcile failed");
    Action::requeue(ctx.failure_backoff(&key))
}

/// The outcome of a finished Job: `Some(true)` succeeded, `Some(false)`
/// failed (with the reason), `None` still running.
pub fn job_outcome(job: &Job) -> Option<(bool, String)> {
    let status = job.status.as_ref()?;
    if status.succeeded.unwrap_or(0) > 0 {
        return Some((true, String::new()));
    }
    let failed_cond = status
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "Failed" || c.type_ == "FailureTarget") && c.status == "True");
    if let Some(c) = failed_cond {
        let why = [c.reason.as_deref(), c.message.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": ");
        return Some((false, why));
    }
    if status.failed.unwrap_or(0) > 0 {
        return Some((false, "the build pod failed".to_string()));
    }
    None
}

/// Container restarts summed over `pods` (negative counts, which the API
/// never reports, count as 0).
pub fn pod_restarts(pods: &[Pod]) -> u32 {
    pods.iter()
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| u32::try_from(c.restart_count).unwrap_or(0))
        .fold(0, u32::saturating_add)
}

/// Reads the restarts of the workload's pods (label `APP_LABEL=<workload>`)
/// into `restarts` (functions and services). Informational: a failed list
/// keeps the previous value (and is logged) rather than failing the reconcile.
pub(crate) async fn record_restarts(
    ctx: &Ctx,
    deploy_ns: &str,
    workload: &str,
    restarts: &mut u32,
) {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), deploy_ns);
    let selector = format!("{}={workload}", names::APP_LABEL);
    match pods.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => *restarts = pod_restarts(&list.items),
        Err(e) => tracing::warn!(%deploy_ns, %workload, error = %e, "cannot list pods"),
    }
}

/// True when a Deployment has rolled out its current generation and is
/// available. One scaled to zero (`replicas: 0`) has nothing to roll out:
/// it is ready as it is (a function only goes to zero after it was Ready).
pub(crate) fn deployment_ready(d: &Deployment) -> bool {
    if d.spec.replicas == Some(0) {
        return true;
    }
    let generation = d.metadata.generation.unwrap_or(0);
    d.status.as_ref().is_some_and(|s| {
        s.observed_generation.unwrap_or(0) >= generation
            && s.updated_replicas.unwrap_or(0) >= 1
            && s.available_replicas.unwrap_or(0) >= 1
            && s.unavailable_replicas.unwrap_or(0) == 0
    })
}

/// The status fields a kind run by a Deployment (functions and services)
/// keeps about it.
pub(crate) struct WorkloadFields<'a> {
    /// `status.phase`.
    pub phase: &'a mut Option<String>,
    /// `status.message`.
    pub message: &'a mut Option<String>,
    /// `status.url`.
    pub url: &'a mut Option<String>,
    /// `status.restarts`.
    pub restarts: &'a mut u32,
    /// `status.conditions`.
    pub conditions: &'a mut Vec<Condition>,
}

/// A status with [`WorkloadFields`].
pub(crate) trait WorkloadStatus {
    /// Its workload fields.
    fn workload(&mut self) -> WorkloadFields<'_>;
}

impl WorkloadStatus for FunctionStatus {
    fn workload(&mut self) -> WorkloadFields<'_> {
        WorkloadFields {
            phase: &mut self.phase,
            message: &mut self.message,
            url: &mut self.url,
            restarts: &mut self.restarts,
            conditions: &mut self.conditions,
        }
    }
}

/// The code and runtime a function or service is built from. Without them
/// `st` says why (`Pending`: no code yet; `Failed`: an unknown runtime) and
/// the reconcile waits for a change.
pub(crate) fn code_and_runtime<S: WorkloadStatus>(
    code: Option<&CodeRef>,
    runtime: &str,
    st: &mut S,
) -> Option<(CodeRef, sless_wire::Runtime)> {
    let f = st.workload();
    let Some(code) = code else {
        *f.phase = Some("Pending".into());
        *f.message = Some("waiting for code".into());
        return None;
    };
    let Ok(parsed) = runtime.parse() else {
        *f.phase = Some("Failed".into());
        *f.message = Some(format!("unknown runtime {runtime:?}"));
        return None;
    };
    Some((code.clone(), parsed))
}

/// What [`roll_out`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RolledOut {
    /// The phase is `Ready`.
    pub ready: bool,
    /// The Deployment's available replicas (as the apply answered).
    pub available: i32,
}

/// Server-side applies `deployment` (built from `w`) and the ClusterIP
/// Service of the workload `w`, records its URL and its pods' restarts in
/// `st`, and sets the phase: `Ready` once the Deployment is available (or
/// whatever the Deployment does when `keep_ready`: a function scaling to or
/// from zero stays Ready), else `Building` ("starting").
pub(crate) async fn roll_out<S: WorkloadStatus>(
    ctx: &Ctx,
    w: &Workload<'_>,
    deployment: &Deployment,
    st: &mut S,
    keep_ready: bool,
) -> Result<RolledOut, KubeError> {
    let (kind, ns, name) = (w.kind, w.namespace, w.name);
    let deploy_ns = names::deploy_namespace(ns);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let wname = names::workload_name(kind, name);
    let applied = Api::<Deployment>::namespaced(ctx.client.clone(), &deploy_ns)
        .patch(&wname, &pp, &Patch::Apply(deployment))
        .await?;
    Api::<Service>::namespaced(ctx.client.clone(), &deploy_ns)
        .patch(
            &wname,
            &pp,
            &Patch::Apply(&builders::workload_service(kind, ns, name)),
        )
        .await?;
    let f = st.workload();
    *f.url = Some(builders::service_url(kind, ns, name));
    record_restarts(ctx, &deploy_ns, &wname, f.restarts).await;
    let ready = keep_ready || deployment_ready(&applied);
    let available = applied
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let wanted = deployment.spec.replicas.unwrap_or(1);
    if ready {
        *f.phase = Some("Ready".into());
        *f.message = None;
        let (reason, message) = if wanted == 0 {
            ("ScaledToZero", "scaled to zero; the next request starts it")
        } else if available == 0 {
            ("ScalingUp", "scaling up from zero")
        } else {
            ("Available", "the Deployment is available")
        };
        set_condition(f.conditions, "Ready", true, reason, message);
    } else {
        *f.phase = Some("Building".into());
        *f.message = Some("starting".into());
        set_condition(
            f.conditions,
            "Ready",
            false,
            "Starting",
            "waiting for the Deployment",
        );
    }
    Ok(RolledOut { ready, available })
}

/// When the function last became Ready (its `Ready` condition's transition
/// time, while it is true).
fn ready_since(conditions: &[Condition]) -> Option<Timestamp> {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.0)
}

/// The Deployment's replicas for `f` (see [`scale`]), whether the phase
/// stays `Ready` while the Deployment scales, and when the function becomes
/// idle. Until it is Ready a function runs one replica: a rollout proves
/// itself before the idle clock starts.
fn scaling(f: &Function, old: &FunctionStatus, now: Timestamp) -> (i32, bool, Option<Duration>) {
    if old.phase.as_deref() != Some("Ready") {
        return (1, false, None);
    }
    let annotations = f.metadata.annotations.as_ref();
    let (replicas, idle_in) = scale::desired_replicas(
        f.spec.min_instances,
        f.spec.idle_timeout_sec,
        scale::last_activity(annotations, ready_since(&old.conditions), now),
        scale::keep_until(annotations, now),
        now,
    );
    // Going to zero, or coming back from it: the function stays Ready (a
    // request meanwhile waits in the activator instead of a 503).
    let keep_ready = replicas == 0 || old.instances == 0;
    (replicas, keep_ready, idle_in)
}

async fn apply(f: Arc<Function>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = f.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let name = f.name_any();
    let api: Api<Function> = Api::namespaced(ctx.client.clone(), &ns);
    let old = f.status.clone().unwrap_or_default();
    let mut st = old.clone();

    let Some((code, runtime)) = code_and_runtime(f.spec.code.as_ref(), &f.spec.runtime, &mut st)
    else {
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    };
    let deploy_ns = names::deploy_namespace(&ns);
    let target = build::Target {
        kind: OwnerKind::Function,
        namespace: &ns,
        name: &name,
        code_key: &code.key,
    };
    let tag = target.tag();
    let image = target.image(&ctx.opts.registry);
    let job_name = target.job_name();
    match build::step(&ctx, target, &mut st.build).await? {
        Progress::Started => {
            st.phase = Some("Building".into());
            st.message = Some(format!("building {image}"));
            set_condition(
                &mut st.conditions,
                "Built",
                false,
                "Building",
                &format!("kaniko Job {job_name}"),
            );
            set_condition(
                &mut st.conditions,
                "Ready",
                false,
                "Building",
                "waiting for the build",
            );
            patch_status(&api, &name, &old, &st).await?;
            ctx.event(
                f.as_ref(),
                EventType::Normal,
                "BuildStarted",
                format!("building {image} in Job {deploy_ns}/{job_name}"),
            )
            .await;
            Ok(Action::requeue(REQUEUE_BUILDING))
        }
        Progress::Running => {
            patch_status(&api, &name, &old, &st).await?;
            Ok(Action::requeue(REQUEUE_BUILDING))
        }
        Progress::Failed { why } => {
            if let Some(why) = why {
                st.message = Some(format!("build failed: {why}; see the build log"));
            }
            st.phase = Some("Failed".into());
            set_condition(
                &mut st.conditions,
                "Built",
                false,
                "BuildFailed",
                st.message.as_deref().unwrap_or(""),
            );
            set_condition(
                &mut st.conditions,
                "Ready",
                false,
                "BuildFailed",
                "the build failed; waiting for new code",
            );
            if status_changed(&old, &st) {
                ctx.event(
                    f.as_ref(),
                    EventType::Warning,
                    "BuildFailed",
                    st.message.clone().unwrap_or_default(),
                )
                .await;
            }
            patch_status(&api, &name, &old, &st).await?;
            // Only new code (a new tag) starts another build.
            Ok(Action::await_change())
        }
        Progress::Succeeded => {
            let first_time = old
                .build
                .as_ref()
                .is_none_or(|b| b.tag != tag || b.state != BuildState::Succeeded);
            if first_time {
                st.last_built_at = Some(Timestamp::now().to_string());
                st.image_ref = Some(image.clone());
                st.code_sha256 = Some(code.sha256.clone());
                set_condition(&mut st.conditions, "Built", true, "Built", &image);
                ctx.event(
                    f.as_ref(),
                    EventType::Normal,
                    "BuildSucceeded",
                    format!("built {image}"),
                )
                .await;
            }
            let w = Workload {
                kind: OwnerKind::Function,
                namespace: &ns,
                name: &name,
                runtime,
                entrypoint: &f.spec.entrypoint,
                env_vars: &f.spec.env_vars,
                secret_env_vars: &f.spec.secret_env_vars,
                memory_mb: f.spec.memory_mb,
                timeout_sec: f.spec.timeout_sec,
                image: &image,
            };
            let (replicas, keep_ready, idle_in) = scaling(&f, &old, Timestamp::now());
            let deployment = builders::deployment(&ctx.opts, &w, replicas);
            let out = roll_out(&ctx, &w, &deployment, &mut st, keep_ready).await?;
            let ready = out.ready;
            st.instances = if replicas == 0 {
                0
            } else {
                u32::from(out.available >= 1)
            };
            if ready && old.phase.as_deref() != Some("Ready") {
                ctx.event(
                    f.as_ref(),
                    EventType::Normal,
                    "Ready",
                    "the function serves".to_string(),
                )
                .await;
            }
            patch_status(&api, &name, &old, &st).await?;
            let settled = ready && (replicas == 0 || out.available >= 1);
            let requeue = if settled {
                REQUEUE_READY
            } else {
                REQUEUE_STARTING
            };
            // Look again the moment it becomes idle.
            Ok(Action::requeue(idle_in.map_or(requeue, |i| i.min(requeue))))
        }
    }
}

/// Deletes every child (build Jobs, Deployment, Service); tolerates children
/// already gone and an apply that never ran.
async fn cleanup(f: Arc<Function>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let secrets = !f.spec.secret_env_vars.is_empty();
    cleanup_workload(OwnerKind::Function, f.as_ref(), secrets, &ctx).await
}

/// Deletes the build Jobs, the Deployment and the Service of a function or
/// service (`kind`), and its env Secret when it has `secrets`, tolerating
/// children already gone.
pub(crate) async fn cleanup_workload<K: Resource>(
    kind: OwnerKind,
    obj: &K,
    secrets: bool,
    ctx: &Ctx,
) -> Result<Action, KubeError> {
    let ns = obj.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let name = obj.name_any();
    let deploy_ns = names::deploy_namespace(&ns);
    let lp = ListParams::default().labels(&names::owner_selector(kind, &ns, &name));
    delete_all_if_present(&Api::<Job>::namespaced(ctx.client.clone(), &deploy_ns), &lp).await?;
    let wname = names::workload_name(kind, &name);
    delete_if_present(
        &Api::<Deployment>::namespaced(ctx.client.clone(), &deploy_ns),
        &wname,
    )
    .await?;
    delete_if_present(
        &Api::<Service>::namespaced(ctx.client.clone(), &deploy_ns),
        &wname,
    )
    .await?;
    if secrets {
        delete_if_present(
            &Api::<Secret>::namespaced(ctx.client.clone(), &deploy_ns),
            &names::env_secret_name(kind, &name),
        )
        .await?;
    }
    Ok(Action::await_change())
}

/// Runs the Function controller until `shutdown` completes: watches
/// Functions, and by owner label their Deployments, Services and build Jobs
/// (so deleting a child by hand triggers a reconcile that recreates it).
pub async fn run(ctx: Arc<Ctx>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    Controlled::<Function>::new(&ctx)
        .owns::<Deployment>()
        .owns::<Service>()
        .owns::<Job>()
        .run(ctx, shutdown, reconcile, error_policy)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

    #[test]
    fn conditions_keep_their_time_unless_status_flips() {
        let mut c = Vec::new();
        set_condition(&mut c, "Ready", false, "Building", "x");
        c[0].last_transition_time = Time(Timestamp::UNIX_EPOCH);
        set_condition(&mut c, "Ready", false, "Starting", "y");
        assert_eq!(c[0].last_transition_time, Time(Timestamp::UNIX_EPOCH));
        assert_eq!(c[0].reason, "Starting");
        set_condition(&mut c, "Ready", true, "Available", "");
        assert_ne!(c[0].last_transition_time, Time(Timestamp::UNIX_EPOCH));
        let a = FunctionStatus {
            conditions: c.clone(),
            ..Default::default()
        };
        let mut b = a.clone();
        b.conditions[0].last_transition_time = Time(Timestamp::UNIX_EPOCH);
        assert!(!status_changed(&a, &b), "timestamps alone are not a change");
        b.phase = Some("Ready".into());
        assert!(status_changed(&a, &b));
    }

    #[test]
    fn job_outcomes() {
        let mut j = Job::default();
        assert_eq!(job_outcome(&j), None);
        j.status = Some(JobStatus {
            active: Some(1),
            ..Default::default()
        });
        assert_eq!(job_outcome(&j), None);
        j.status = Some(JobStatus {
            succeeded: Some(1),
            ..Default::default()
        });
        assert_eq!(job_outcome(&j), Some((true, String::new())));
        j.status = Some(JobStatus {
            failed: Some(1),
            conditions: Some(vec![JobCondition {
                type_: "Failed".into(),
                status: "True".into(),
                reason: Some("BackoffLimitExceeded".into()),
                message: Some("Job has reached the specified backoff limit".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let (ok, why) = job_outcome(&j).unwrap();
        assert!(!ok && why.starts_with("BackoffLimitExceeded"));
    }

    #[test]
    fn restarts_are_summed_over_pods_and_containers() {
        let pod = |counts: &[i32]| -> Pod {
            let statuses: Vec<_> = counts
                .iter()
                .map(|n| serde_json::json!({"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": n}))
                .collect();
            serde_json::from_value(serde_json::json!({"status": {"containerStatuses": statuses}}))
                .unwrap()
        };
        assert_eq!(pod_restarts(&[]), 0);
        assert_eq!(pod_restarts(&[Pod::default()]), 0, "a pod not started yet");
        assert_eq!(pod_restarts(&[pod(&[2]), pod(&[1, 3])]), 6);
        assert_eq!(pod_restarts(&[pod(&[-1, 4])]), 4);
        assert_eq!(
            pod_restarts(&[pod(&[i32::MAX]), pod(&[i32::MAX]), pod(&[i32::MAX])]),
            u32::MAX
        );
    }
}
