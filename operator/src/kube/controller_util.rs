//! What the four controllers (function, trigger, job, service) share, with
//! each kind's differences passed in: the [`Reconciled`] description of a
//! controlled custom resource; one reconcile inside the kind's finalizer,
//! timed for `/metrics` and forgetting the failure backoff on success
//! ([`reconcile_with_finalizer`]); status writes only when something but a
//! condition timestamp changed ([`patch_status`]); running a controller that
//! also watches the kind's children by owner label ([`Controlled`]); and
//! deleting children that may already be gone (`delete_if_present`,
//! `delete_all_if_present`).

use super::KubeError;
use super::crd::{FunctionJobStatus, FunctionStatus, SlessServiceStatus, TriggerStatus};
use super::function::Ctx;
use super::names::{self, FIELD_MANAGER, OwnerKind};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::core::object::HasStatus;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;

/// A status with conditions (whose timestamps alone are not a change).
pub trait Conditions {
    /// The conditions.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

impl Conditions for FunctionStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

impl Conditions for TriggerStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

impl Conditions for FunctionJobStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

impl Conditions for SlessServiceStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

/// True when two statuses differ in anything but condition timestamps.
pub fn status_changed<S: Conditions + Clone + PartialEq>(a: &S, b: &S) -> bool {
    let strip = |s: &S| {
        let mut s = s.clone();
        for c in s.conditions_mut() {
            c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(a) != strip(b)
}

/// A custom resource kind one of the controllers reconciles.
pub trait Reconciled:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + HasStatus<Status: Conditions + Clone + PartialEq + Serialize>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The controller's name in `/metrics` and logs: `function`, `trigger`,
    /// `job` or `service`.
    const CONTROLLER: &'static str;
    /// The finalizer on every object of the kind.
    const FINALIZER: &'static str;
    /// The owner kind in its children's labels.
    const OWNER: OwnerKind;

    /// The object's key in the failure backoff: `<controller>/<ns>/<name>`.
    fn failure_key(&self) -> String {
        format!(
            "{}/{}/{}",
            Self::CONTROLLER,
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }
}

/// Reconciles `obj` inside its kind's finalizer: `apply` while it lives,
/// `cleanup` once it is being deleted (the finalizer is removed after
/// `cleanup` succeeds). The reconcile is recorded in the metrics, and a
/// success forgets the object's failures.
pub async fn reconcile_with_finalizer<K, A, AF, C, CF>(
    obj: Arc<K>,
    ctx: Arc<Ctx>,
    apply: A,
    cleanup: C,
) -> Result<Action, KubeError>
where
    K: Reconciled,
    A: FnOnce(Arc<K>, Arc<Ctx>) -> AF,
    AF: Future<Output = Result<Action, KubeError>>,
    C: FnOnce(Arc<K>, Arc<Ctx>) -> CF,
    CF: Future<Output = Result<Action, KubeError>>,
{
    let ns = obj.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let key = obj.failure_key();
    let start = std::time::Instant::now();
    let res = finalizer(&api, K::FINALIZER, obj, |ev| async {
        match ev {
            Finalizer::Apply(obj) => apply(obj, ctx.clone()).await,
            Finalizer::Cleanup(obj) => cleanup(obj, ctx.clone()).await,
        }
    })
    .await
    .map_err(|e| KubeError::Finalizer(Box::new(e)));
    ctx.metrics
        .record(K::CONTROLLER, start.elapsed(), res.is_ok());
    let action = res?;
    ctx.reset_failures(&key);
    Ok(action)
}

/// Writes `new` as the status of `name` (server-side apply, forced) unless
/// it differs from `old` only in condition timestamps.
pub async fn patch_status<K: Reconciled>(
    api: &Api<K>,
    name: &str,
    old: &K::Status,
    new: &K::Status,
) -> Result<(), KubeError> {
    if !status_changed(old, new) {
        return Ok(());
    }
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
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

/// True when `e` is an API answer with status `code`.
pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Deletes `name` (in the background), treating "already gone" as done.
pub(crate) async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<(), KubeError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes every object `lp` selects (in the background), treating a 404
/// as nothing to delete.
pub(crate) async fn delete_all_if_present<K>(api: &Api<K>, lp: &ListParams) -> Result<(), KubeError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete_collection(&DeleteParams::background(), lp).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The object of kind `K` a child belongs to, from its owner labels.
fn owner_ref<K: Reconciled, C: ResourceExt>(child: &C) -> Option<ObjectRef<K>> {
    names::owner_of(child.labels()).map(|(ns, name)| ObjectRef::new(&name).within(&ns))
}

/// A controller of kind `K` being set up: it watches every `K`, and the
/// children [`owns`](Controlled::owns) adds, selected by `K`'s owner kind
/// label; a change to a child reconciles its owner.
pub struct Controlled<K: Reconciled> {
    controller: Controller<K>,
    client: Client,
    children: watcher::Config,
}

impl<K: Reconciled> Controlled<K> {
    /// A controller of every `K` in the cluster, without child watches yet.
    pub fn new(ctx: &Ctx) -> Controlled<K> {
        let client = ctx.client.clone();
        Controlled {
            children: watcher::Config::default().labels(&names::kind_selector(K::OWNER)),
            controller: Controller::new(Api::<K>::all(client.clone()), watcher::Config::default()),
            client,
        }
    }

    /// Also watches children of type `C` (by owner label), so that a child
    /// changed or deleted by hand brings its owner back to the desired state.
    pub fn owns<C>(self) -> Controlled<K>
    where
        C: Resource<DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let Controlled {
            controller,
            client,
            children,
        } = self;
        Controlled {
            controller: controller.watches(Api::<C>::all(client.clone()), children.clone(), |c| {
                owner_ref::<K, C>(&c)
            }),
            client,
            children,
        }
    }

    /// Runs the controller (4 reconciles at a time) until `shutdown`
    /// completes.
    pub async fn run<R, RF>(
        self,
        ctx: Arc<Ctx>,
        shutdown: impl Future<Output = ()> + Send + Sync + 'static,
        reconcile: R,
        error_policy: impl Fn(Arc<K>, &KubeError, Arc<Ctx>) -> Action + Send + Sync + 'static,
    ) where
        R: FnMut(Arc<K>, Arc<Ctx>) -> RF + Send + 'static,
        RF: Future<Output = Result<Action, KubeError>> + Send + 'static,
    {
        self.controller
            .graceful_shutdown_on(shutdown)
            .with_config(kube::runtime::controller::Config::default().concurrency(4))
            .run(reconcile, error_policy, ctx)
            .for_each(|res| async move {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "{} controller event", K::CONTROLLER);
                }
            })
            .await;
    }
}
