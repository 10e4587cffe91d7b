//! The Trigger controller. `http`: a Service selecting the function's pods
//! and an Ingress on the configured host under `/<ns>/<trigger>`, with
//! `status.url`. `cron`: a CronJob beside the function calling it with a
//! pinned curl, never two runs at once. Children are made only while the
//! target function is Ready; until then the trigger is `Waiting` and
//! requeued every 15 s. Disabled http triggers lose their children (the URL
//! answers 404); disabled cron triggers are suspended. Children carry owner
//! labels (they live in `sless-fn-<ns>`) and are deleted by the finalizer.

use super::KubeError;
use super::builders;
use super::crd::{Function, Trigger, TriggerStatus};
use super::function::{Ctx, delete_if_present, set_condition};
use super::names::{self, FIELD_MANAGER, OwnerKind};
use futures_util::StreamExt;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The finalizer on every Trigger.
pub const FINALIZER: &str = "sless.kube5s.ru/trigger-cleanup";
/// Requeue while the target function is not Ready.
pub const REQUEUE_WAITING: Duration = Duration::from_secs(15);
/// Periodic requeue of active triggers (self-healing).
pub const REQUEUE_ACTIVE: Duration = Duration::from_secs(60);

fn changed(a: &TriggerStatus, b: &TriggerStatus) -> bool {
    let strip = |s: &TriggerStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(a) != strip(b)
}

async fn patch_status(
    api: &Api<Trigger>,
    name: &str,
    old: &TriggerStatus,
    new: &TriggerStatus,
) -> Result<(), KubeError> {
    if !changed(old, new) {
        return Ok(());
    }
    let body = serde_json::json!({
        "apiVersion": Trigger::api_version(&()),
        "kind": Trigger::kind(&()),
        "status": new,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// Reconciles one Trigger (the finalizer wraps apply and cleanup).
pub async fn reconcile(t: Arc<Trigger>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = t.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let api: Api<Trigger> = Api::namespaced(ctx.client.clone(), &ns);
    let key = format!("trigger/{ns}/{}", t.name_any());
    let start = std::time::Instant::now();
    let res = finalizer(&api, FINALIZER, t, |ev| async {
        match ev {
            Finalizer::Apply(t) => apply(t, ctx.clone()).await,
            Finalizer::Cleanup(t) => cleanup(t, ctx.clone()).await,
        }
    })
    .await
    .map_err(|e| KubeError::Finalizer(Box::new(e)));
    ctx.metrics.record("trigger", start.elapsed(), res.is_ok());
    let action = res?;
    ctx.reset_failures(&key);
    Ok(action)
}

/// What to do after a failed reconcile: retry with a per-object backoff.
pub fn error_policy(t: Arc<Trigger>, err: &KubeError, ctx: Arc<Ctx>) -> Action {
    let key = format!(
        "trigger/{}/{}",
        t.namespace().unwrap_or_default(),
        t.name_any()
    );
    tracing::warn!(trigger = %key, error = %err, "reconcile failed");
    Action::requeue(ctx.failure_backoff(&key))
}

async fn apply(t: Arc<Trigger>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = t.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let name = t.name_any();
    let api: Api<Trigger> = Api::namespaced(ctx.client.clone(), &ns);
    let deploy_ns = names::deploy_namespace(&ns);
    let child = names::workload_name(OwnerKind::Trigger, &name);
    let old = t.status.clone().unwrap_or_default();
    let mut st = old.clone();
    let is_http = t.spec.trigger_type == "http";
    if is_http {
        st.url = Some(builders::trigger_url(&ctx.opts, &ns, &name));
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();

    if !t.spec.enabled {
        if is_http {
            delete_if_present(
                &Api::<Ingress>::namespaced(ctx.client.clone(), &deploy_ns),
                &child,
            )
            .await?;
            delete_if_present(
                &Api::<Service>::namespaced(ctx.client.clone(), &deploy_ns),
                &child,
            )
            .await?;
        } else if let Some(schedule) = &t.spec.schedule {
            let cj = builders::cron_job(
                &ns,
                &name,
                &t.spec.function,
                schedule,
                t.spec.payload.as_deref(),
                true,
            );
            Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns)
                .patch(&child, &pp, &Patch::Apply(&cj))
                .await?;
        }
        st.phase = Some("Disabled".into());
        st.message = None;
        set_condition(
            &mut st.conditions,
            "Ready",
            false,
            "Disabled",
            "enabled = false",
        );
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    }

    let functions: Api<Function> = Api::namespaced(ctx.client.clone(), &ns);
    let target = functions.get_opt(&t.spec.function).await?;
    let phase = target
        .as_ref()
        .filter(|f| f.metadata.deletion_timestamp.is_none())
        .and_then(|f| f.status.as_ref())
        .and_then(|s| s.phase.clone());
    if phase.as_deref() != Some("Ready") {
        let why = match (&target, phase) {
            (None, _) => format!("function {:?} does not exist", t.spec.function),
            (Some(_), p) => format!(
                "function {:?} is {}",
                t.spec.function,
                p.as_deref().unwrap_or("Pending")
            ),
        };
        st.phase = Some("Waiting".into());
        st.message = Some(why.clone());
        set_condition(&mut st.conditions, "Ready", false, "FunctionNotReady", &why);
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::requeue(REQUEUE_WAITING));
    }

    if is_http {
        let (svc, ing) = builders::http_trigger(&ctx.opts, &ns, &name, &t.spec.function);
        Api::<Service>::namespaced(ctx.client.clone(), &deploy_ns)
            .patch(&child, &pp, &Patch::Apply(&svc))
            .await?;
        Api::<Ingress>::namespaced(ctx.client.clone(), &deploy_ns)
            .patch(&child, &pp, &Patch::Apply(&ing))
            .await?;
    } else {
        let Some(schedule) = &t.spec.schedule else {
            st.phase = Some("Waiting".into());
            st.message = Some("a cron trigger needs a schedule".into());
            patch_status(&api, &name, &old, &st).await?;
            return Ok(Action::await_change());
        };
        let cj = builders::cron_job(
            &ns,
            &name,
            &t.spec.function,
            schedule,
            t.spec.payload.as_deref(),
            false,
        );
        Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns)
            .patch(&child, &pp, &Patch::Apply(&cj))
            .await?;
    }
    st.phase = Some("Active".into());
    st.message = None;
    set_condition(
        &mut st.conditions,
        "Ready",
        true,
        "Active",
        "children applied",
    );
    if changed(&old, &st) {
        ctx.event(
            t.as_ref(),
            EventType::Normal,
            "Active",
            format!("calls function {}", t.spec.function),
        )
        .await;
    }
    patch_status(&api, &name, &old, &st).await?;
    Ok(Action::requeue(REQUEUE_ACTIVE))
}

/// Deletes the Ingress, Service and CronJob of a trigger; tolerates them
/// being gone already.
async fn cleanup(t: Arc<Trigger>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = t.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let deploy_ns = names::deploy_namespace(&ns);
    let child = names::workload_name(OwnerKind::Trigger, &t.name_any());
    delete_if_present(
        &Api::<Ingress>::namespaced(ctx.client.clone(), &deploy_ns),
        &child,
    )
    .await?;
    delete_if_present(
        &Api::<Service>::namespaced(ctx.client.clone(), &deploy_ns),
        &child,
    )
    .await?;
    delete_if_present(
        &Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns),
        &child,
    )
    .await?;
    Ok(Action::await_change())
}

fn owner_ref<K: ResourceExt>(child: &K) -> Option<ObjectRef<Trigger>> {
    names::owner_of(child.labels()).map(|(ns, name)| ObjectRef::new(&name).within(&ns))
}

/// Runs the Trigger controller until `shutdown` completes: watches Triggers
/// and, by owner label, their Services, Ingresses and CronJobs.
pub async fn run(ctx: Arc<Ctx>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let children = watcher::Config::default().labels(&names::kind_selector(OwnerKind::Trigger));
    Controller::new(
        Api::<Trigger>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(Api::<Service>::all(client.clone()), children.clone(), |s| {
        owner_ref(&s)
    })
    .watches(Api::<Ingress>::all(client.clone()), children.clone(), |i| {
        owner_ref(&i)
    })
    .watches(Api::<CronJob>::all(client), children, |c| owner_ref(&c))
    .graceful_shutdown_on(shutdown)
    .with_config(kube::runtime::controller::Config::default().concurrency(4))
    .run(reconcile, error_policy, ctx)
    .for_each(|res| async move {
        if let Err(e) = res {
            tracing::debug!(error = %e, "trigger controller event");
        }
    })
    .await;
}
