//! The Service controller (kind `Service`, Rust type `SlessService`): a
//! long-running user server built like a function (the shared build state
//! machine), run by a Deployment (`svc-<name>`) with a ClusterIP Service in
//! `sless-fn-<ns>`. Env, command, memory and health path changes are applied
//! in place (no rebuild). Self-healing: children are watched by owner label
//! and Ready services are re-reconciled every 60 s, so a Deployment deleted
//! by hand is recreated. Like the Function controller, each deploy step lists
//! the service's pods (no pod watch) and records their container restarts in
//! `status.restarts`.

use super::KubeError;
use super::build::{self, Progress};
use super::builders::{self, Workload};
use super::controller_util::{Controlled, Reconciled, patch_status, reconcile_with_finalizer};
use super::crd::{SlessService, SlessServiceStatus};
use super::function::{
    Ctx, WorkloadFields, WorkloadStatus, cleanup_workload, code_and_runtime, roll_out,
    set_condition,
};
use super::names::OwnerKind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The finalizer on every sless Service.
pub const FINALIZER: &str = "sless.kube5s.ru/service-cleanup";
/// Requeue while building or starting.
pub const REQUEUE_ACTIVE: Duration = Duration::from_secs(5);
/// Periodic requeue of Ready services (self-healing).
pub const REQUEUE_READY: Duration = Duration::from_secs(60);

impl WorkloadStatus for SlessServiceStatus {
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

impl Reconciled for SlessService {
    const CONTROLLER: &'static str = "service";
    const FINALIZER: &'static str = FINALIZER;
    const OWNER: OwnerKind = OwnerKind::Service;
}

/// Reconciles one sless Service (the finalizer wraps apply and cleanup).
pub async fn reconcile(s: Arc<SlessService>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    reconcile_with_finalizer(s, ctx, apply, cleanup).await
}

/// What to do after a failed reconcile: retry with a per-object backoff.
pub fn error_policy(s: Arc<SlessService>, err: &KubeError, ctx: Arc<Ctx>) -> Action {
    let key = s.failure_key();
    tracing::warn!(service = %key, error = %err, "reconcile failed");
    Action::requeue(ctx.failure_backoff(&key))
}

async fn apply(s: Arc<SlessService>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = s.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let name = s.name_any();
    let api: Api<SlessService> = Api::namespaced(ctx.client.clone(), &ns);
    let old = s.status.clone().unwrap_or_default();
    let mut st = old.clone();
    let Some((code, runtime)) = code_and_runtime(s.spec.code.as_ref(), &s.spec.runtime, &mut st)
    else {
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    };
    let target = build::Target {
        kind: OwnerKind::Service,
        namespace: &ns,
        name: &name,
        code_key: &code.key,
    };
    let image = target.image(&ctx.opts.registry);
    match build::step(&ctx, target, &mut st.build).await? {
        Progress::Started | Progress::Running => {
            st.phase = Some("Building".into());
            st.message = Some(format!("building {image}"));
            set_condition(
                &mut st.conditions,
                "Ready",
                false,
                "Building",
                "waiting for the build",
            );
            patch_status(&api, &name, &old, &st).await?;
            return Ok(Action::requeue(REQUEUE_ACTIVE));
        }
        Progress::Failed { why } => {
            if let Some(why) = why {
                st.message = Some(format!("build failed: {why}; see the build log"));
                ctx.event(
                    s.as_ref(),
                    EventType::Warning,
                    "BuildFailed",
                    st.message.clone().unwrap_or_default(),
                )
                .await;
            }
            st.phase = Some("Failed".into());
            set_condition(
                &mut st.conditions,
                "Ready",
                false,
                "BuildFailed",
                "waiting for new code",
            );
            patch_status(&api, &name, &old, &st).await?;
            return Ok(Action::await_change());
        }
        Progress::Succeeded => {}
    }
    let script = s.spec.entrypoint.clone().unwrap_or_default();
    let w = Workload {
        kind: OwnerKind::Service,
        namespace: &ns,
        name: &name,
        runtime,
        entrypoint: &script,
        env_vars: &s.spec.env_vars,
        secret_env_vars: &s.spec.secret_env_vars,
        memory_mb: s.spec.memory_mb,
        timeout_sec: s.spec.timeout_sec,
        image: &image,
    };
    let deployment =
        builders::service_deployment(&ctx.opts, &w, &s.spec.command, &s.spec.health_path);
    let ready = roll_out(&ctx, &w, &deployment, &mut st, false).await?.ready;
    if ready && old.phase.as_deref() != Some("Ready") {
        ctx.event(
            s.as_ref(),
            EventType::Normal,
            "Ready",
            "the service serves".into(),
        )
        .await;
    }
    patch_status(&api, &name, &old, &st).await?;
    Ok(Action::requeue(if ready {
        REQUEUE_READY
    } else {
        REQUEUE_ACTIVE
    }))
}

/// Deletes the build Jobs, the Deployment and the Service.
async fn cleanup(s: Arc<SlessService>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let secrets = !s.spec.secret_env_vars.is_empty();
    cleanup_workload(OwnerKind::Service, s.as_ref(), secrets, &ctx).await
}

/// Runs the Service controller until `shutdown` completes: watches sless
/// Services and, by owner label, their Deployments, Services and build Jobs.
pub async fn run(ctx: Arc<Ctx>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    Controlled::<SlessService>::new(&ctx)
        .owns::<Deployment>()
        .owns::<Service>()
        .owns::<Job>()
        .run(ctx, shutdown, reconcile, error_policy)
        .await;
}
