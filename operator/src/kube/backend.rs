//! [`KubeBackend`]: the REST API's [`Backend`] over custom resources. It
//! writes and reads `Function`, `Trigger`, `FunctionJob` and `Service`
//! objects in the user namespace, stores code in the object store, and (when
//! started with [`KubeBackend::connect`]) runs the controllers that turn the
//! objects into builds and Deployments. The four kinds share one generic
//! create / get / list / delete, one code upload, and one update with
//! optimistic concurrency (read, change, replace at the read
//! resourceVersion, retry on conflict); each kind only says how its spec
//! changes. API-server errors map to the API's: "invalid" → 400, "already
//! exists" → 409, not found → 404; never a 500 for input.

use super::KubeOptions;
use super::activator::Activator;
use super::activity::Activity;
use super::builders;
use super::controllers::Controllers;
use super::crd::{
    BuildStatus, CodeRef, Function, FunctionJob, FunctionJobSpec, FunctionSpec, SlessService,
    SlessServiceSpec, Trigger, TriggerSpec,
};
use super::function::Ctx;
use super::leader::LeaderOptions;
use super::names::{self, FIELD_MANAGER, OwnerKind};
use super::objstore::{self, CodeStore, StoreError};
use crate::backend::{Backend, CodeBundle, InvokeTarget};
use crate::{Error, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::core::NamespaceResourceScope;
use kube::core::object::HasStatus;
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sless_wire::function::{FunctionStatus as WireStatus, LogKind, NamespaceInfo};
use sless_wire::{Phase, UpdateFunction, paths};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Annotation holding the RFC 3339 time of the last spec or code change.
pub const UPDATED_AT: &str = "sless.kube5s.ru/updated-at";

/// The Kubernetes backend.
pub struct KubeBackend {
    client: Client,
    opts: KubeOptions,
    store: CodeStore,
    /// Fires once at shutdown (ends the leader campaign).
    shutdown: watch::Sender<bool>,
    /// The controllers, run at startup or while this replica leads.
    controllers: Arc<Controllers>,
    /// The leader campaign, when leader election is on.
    campaign: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Namespaces fully set up by this process (deploy namespace, policy,
    /// secrets); later calls only check that the user namespace exists.
    ensured: Mutex<HashSet<String>>,
    /// Records requests to functions that scale to zero.
    activity: Activity,
    /// Holds requests for functions at zero until they serve again.
    activator: Activator,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("registry", &self.opts.registry)
            .field("bucket", &self.opts.s3.bucket)
            .finish()
    }
}

/// Maps an API-server error about `kind` `ns/name` to the API's error.
pub fn map_kube_error(e: kube::Error, kind: &'static str, ns: &str, name: &str) -> Error {
    match e {
        kube::Error::Api(s) => match (s.code, s.reason.as_str()) {
            (409, "AlreadyExists") => Error::AlreadyExists {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            },
            (409, _) => Error::Conflict(format!(
                "{kind} {name:?} was changed concurrently: {}",
                s.message
            )),
            (422, _) | (400, _) => Error::BadRequest(format!("invalid {kind}: {}", s.message)),
            (404, _) => Error::NotFound {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            },
            (code, _) => Error::Internal(format!("kubernetes API answered {code}: {}", s.message)),
        },
        other => Error::Internal(format!("kubernetes API: {other}")),
    }
}

fn store_error(e: StoreError) -> Error {
    match e {
        StoreError::Context(c) => match c {
            super::context::ContextError::Zip(z) => Error::BadZip(z),
            other => Error::BadRequest(other.to_string()),
        },
        StoreError::Store(s) => Error::Internal(format!("object store: {s}")),
    }
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn phase_of(s: Option<&str>) -> Phase {
    match s {
        Some("Building") => Phase::Building,
        Some("Ready") => Phase::Ready,
        Some("Failed") => Phase::Failed,
        Some("Deleting") => Phase::Deleting,
        _ => Phase::Pending,
    }
}

/// The phase of a function or service: `Deleting` once its deletion started.
fn workload_phase(meta: &ObjectMeta, phase: Option<&str>) -> Phase {
    if meta.deletion_timestamp.is_some() {
        Phase::Deleting
    } else {
        phase_of(phase)
    }
}

/// A 500 for an object written with a runtime this operator does not know.
fn unknown_runtime(noun: &str, name: &str, runtime: &str) -> Error {
    Error::Internal(format!("{noun} {name} has an unknown runtime {runtime:?}"))
}

fn times(meta: &kube::api::ObjectMeta) -> (String, String) {
    let created = meta
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let updated = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(UPDATED_AT).cloned())
        .unwrap_or_else(|| created.clone());
    (created, updated)
}

/// The wire form of a Trigger object.
pub fn trigger_to_wire(t: &Trigger) -> Result<sless_wire::Trigger> {
    use sless_wire::{TriggerPhase, TriggerType};
    let trigger_type = match t.spec.trigger_type.as_str() {
        "http" => TriggerType::Http,
        "cron" => TriggerType::Cron,
        other => {
            return Err(Error::Internal(format!(
                "trigger {} has an unknown type {other:?}",
                t.name_any()
            )));
        }
    };
    let st = t.status.clone().unwrap_or_default();
    let phase = match st.phase.as_deref() {
        Some("Active") => TriggerPhase::Active,
        Some("Disabled") => TriggerPhase::Disabled,
        _ if !t.spec.enabled => TriggerPhase::Disabled,
        _ => TriggerPhase::Waiting,
    };
    let (created_at, updated_at) = times(&t.metadata);
    Ok(sless_wire::Trigger {
        namespace: t.namespace().unwrap_or_default(),
        name: t.name_any(),
        spec: sless_wire::TriggerSpec {
            function: t.spec.function.clone(),
            trigger_type,
            schedule: t.spec.schedule.clone(),
            payload: t.spec.payload.clone(),
            enabled: t.spec.enabled,
        },
        status: sless_wire::TriggerStatus {
            phase,
            message: st.message.clone(),
            url: st.url.clone(),
            // Only an Active trigger is scheduled (a disabled one may not
            // have been reconciled yet).
            next_run_at: st
                .next_run_at
                .clone()
                .filter(|_| phase == TriggerPhase::Active),
            last_run: st.last_run.as_ref().map(|r| sless_wire::TriggerRun {
                started_at: r.started_at.clone(),
                completed_at: r.completed_at.clone(),
                // curl reports only success (-f: below 400) or failure.
                status_code: None,
                ok: r.ok,
                message: r.message.clone(),
            }),
            runs: st.runs,
            // Kubernetes does not report ticks skipped by `Forbid`.
            skipped: 0,
        },
        created_at,
        updated_at,
    })
}

/// Refuses (400 naming `schedule`) a cron schedule a CronJob cannot run:
/// six fields with seconds other than `0` (see
/// [`builders::cron_job_schedule`]). The spec keeps the schedule as written.
fn cron_schedule_runs_here(s: &sless_wire::TriggerSpec) -> Result<()> {
    if s.trigger_type == sless_wire::TriggerType::Cron
        && let Some(schedule) = &s.schedule
    {
        builders::cron_job_schedule(schedule)?;
    }
    Ok(())
}

fn trigger_spec(s: &sless_wire::TriggerSpec) -> TriggerSpec {
    TriggerSpec {
        function: s.function.clone(),
        trigger_type: s.trigger_type.as_str().to_string(),
        schedule: s.schedule.clone(),
        payload: s.payload.clone(),
        enabled: s.enabled,
    }
}

/// The wire form of a FunctionJob object.
pub fn job_to_wire(j: &FunctionJob) -> Result<sless_wire::Job> {
    use sless_wire::JobPhase;
    let runtime = j.runtime()?;
    let st = j.status.clone().unwrap_or_default();
    let phase = match st.phase.as_deref() {
        Some("Building") => JobPhase::Building,
        Some("Running") => JobPhase::Running,
        Some("Succeeded") => JobPhase::Succeeded,
        Some("Failed") => JobPhase::Failed,
        _ => JobPhase::Pending,
    };
    let (created_at, updated_at) = times(&j.metadata);
    let code = j.spec.code.as_ref();
    Ok(sless_wire::Job {
        namespace: j.namespace().unwrap_or_default(),
        name: j.name_any(),
        generation: j.metadata.generation.unwrap_or(1).max(0) as u64,
        spec: sless_wire::JobSpec {
            runtime,
            entrypoint: j.spec.entrypoint.clone(),
            env_vars: j.spec.env_vars.clone(),
            secret_env_vars: j.spec.secret_env_vars.to_wire(),
            input: j.spec.input.clone(),
            run_id: j.spec.run_id,
            memory_mb: j.spec.memory_mb,
            timeout_sec: j.spec.timeout_sec,
        },
        status: sless_wire::JobStatus {
            phase,
            message: st.message.clone(),
            error: st.error.clone(),
            started_at: st.started_at.clone(),
            completed_at: st.completed_at.clone(),
            code_sha256: code.map(|c| c.sha256.clone()),
            source_hash: code.and_then(|c| c.source_hash.clone()),
            image_ref: st.image_ref.clone(),
            observed_generation: st.observed_generation.unwrap_or(0).max(0) as u64,
        },
        created_at,
        updated_at,
    })
}

fn job_spec(s: &sless_wire::JobSpec, code: Option<CodeRef>) -> FunctionJobSpec {
    FunctionJobSpec {
        runtime: s.runtime.as_str().to_string(),
        entrypoint: s.entrypoint.clone(),
        env_vars: s.env_vars.clone(),
        secret_env_vars: (&s.secret_env_vars).into(),
        input: s.input.clone(),
        run_id: s.run_id,
        memory_mb: s.memory_mb,
        timeout_sec: s.timeout_sec,
        code,
    }
}

/// The wire form of a sless Service object.
pub fn service_to_wire(v: &SlessService) -> Result<sless_wire::Service> {
    let spec = v
        .spec
        .to_wire()
        .map_err(|r| unknown_runtime("service", &v.name_any(), &r))?;
    let st = v.status.clone().unwrap_or_default();
    let phase = workload_phase(&v.metadata, st.phase.as_deref());
    let (created_at, updated_at) = times(&v.metadata);
    let code = v.spec.code.as_ref();
    Ok(sless_wire::Service {
        namespace: v.namespace().unwrap_or_default(),
        name: v.name_any(),
        spec,
        status: sless_wire::ServiceStatus {
            phase,
            message: st.message.clone(),
            code_sha256: code.map(|c| c.sha256.clone()),
            source_hash: code.and_then(|c| c.source_hash.clone()),
            url: st.url.clone(),
            last_built_at: None,
            restarts: st.restarts,
        },
        created_at,
        updated_at,
    })
}

/// The wire form of a Function object.
pub fn to_wire(f: &Function) -> Result<sless_wire::Function> {
    let ns = f.namespace().unwrap_or_default();
    let name = f.name_any();
    let spec = f
        .spec
        .to_wire()
        .map_err(|r| unknown_runtime("function", &format!("{ns}/{name}"), &r))?;
    let st = f.status.clone().unwrap_or_default();
    let phase = workload_phase(&f.metadata, st.phase.as_deref());
    let (created_at, updated_at) = times(&f.metadata);
    let code = f.spec.code.as_ref();
    Ok(sless_wire::Function {
        status: WireStatus {
            phase,
            message: st.message.clone(),
            code_sha256: code.map(|c| c.sha256.clone()),
            source_hash: code.and_then(|c| c.source_hash.clone()),
            image_ref: st.image_ref.clone(),
            last_built_at: st.last_built_at.clone(),
            invoke_path: paths::function_invoke(&ns, &name),
            restarts: st.restarts,
            // From the Deployment's available replicas (0 at zero).
            instances: if phase == Phase::Ready {
                st.instances.min(1)
            } else {
                0
            },
        },
        namespace: ns,
        name,
        spec,
        created_at,
        updated_at,
    })
}

/// A custom resource the REST API serves: its noun in errors and its wire
/// form. The generic reads and writes of [`KubeBackend`] go through it.
trait RestKind:
    kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + HasStatus
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
{
    /// The noun in API errors: `function`, `trigger`, `job` or `service`.
    const NOUN: &'static str;
    /// The REST form.
    type Wire;
    /// The REST form (a 500 for an object written with an unknown runtime).
    fn wire(&self) -> Result<Self::Wire>;
}

/// A custom resource with uploaded code (`spec.code`) built for its runtime,
/// whose spec mirrors a wire spec.
trait CodeKind: RestKind {
    /// The wire spec.
    type Spec: PartialEq;
    /// The code it has, if any.
    fn code(&self) -> Option<&CodeRef>;
    /// Its runtime (a 500 for an unknown one).
    fn runtime(&self) -> Result<sless_wire::Runtime>;
    /// Its spec in wire form (a 500 for an unknown runtime).
    fn wire_spec(&self) -> Result<Self::Spec>;
    /// The runtime of a wire spec.
    fn spec_runtime(spec: &Self::Spec) -> sless_wire::Runtime;
    /// Sets the spec to `spec` with `code`.
    fn set_spec(&mut self, spec: &Self::Spec, code: Option<CodeRef>);
    /// The owner kind of its children.
    const OWNER: OwnerKind;
    /// The secret env vars of a wire spec.
    fn spec_secrets(spec: &Self::Spec) -> &sless_wire::SecretEnv;
}

impl RestKind for Function {
    const NOUN: &'static str = "function";
    type Wire = sless_wire::Function;
    fn wire(&self) -> Result<Self::Wire> {
        to_wire(self)
    }
}

impl CodeKind for Function {
    const OWNER: OwnerKind = OwnerKind::Function;
    fn spec_secrets(spec: &Self::Spec) -> &sless_wire::SecretEnv {
        &spec.secret_env_vars
    }
    type Spec = sless_wire::function::FunctionSpec;
    fn code(&self) -> Option<&CodeRef> {
        self.spec.code.as_ref()
    }
    fn runtime(&self) -> Result<sless_wire::Runtime> {
        self.spec
            .runtime()
            .ok_or_else(|| Error::Internal(format!("unknown runtime {:?}", self.spec.runtime)))
    }
    fn wire_spec(&self) -> Result<Self::Spec> {
        self.spec
            .to_wire()
            .map_err(|r| Error::Internal(format!("unknown runtime {r:?}")))
    }
    fn spec_runtime(spec: &Self::Spec) -> sless_wire::Runtime {
        spec.runtime
    }
    fn set_spec(&mut self, spec: &Self::Spec, code: Option<CodeRef>) {
        self.spec = FunctionSpec {
            code,
            ..FunctionSpec::from(spec)
        };
    }
}

impl RestKind for Trigger {
    const NOUN: &'static str = "trigger";
    type Wire = sless_wire::Trigger;
    fn wire(&self) -> Result<Self::Wire> {
        trigger_to_wire(self)
    }
}

impl RestKind for FunctionJob {
    const NOUN: &'static str = "job";
    type Wire = sless_wire::Job;
    fn wire(&self) -> Result<Self::Wire> {
        job_to_wire(self)
    }
}

impl CodeKind for FunctionJob {
    const OWNER: OwnerKind = OwnerKind::FunctionJob;
    fn spec_secrets(spec: &Self::Spec) -> &sless_wire::SecretEnv {
        &spec.secret_env_vars
    }
    type Spec = sless_wire::JobSpec;
    fn code(&self) -> Option<&CodeRef> {
        self.spec.code.as_ref()
    }
    fn runtime(&self) -> Result<sless_wire::Runtime> {
        self.spec
            .runtime
            .parse()
            .map_err(|_| unknown_runtime("job", &self.name_any(), &self.spec.runtime))
    }
    fn wire_spec(&self) -> Result<Self::Spec> {
        Ok(job_to_wire(self)?.spec)
    }
    fn spec_runtime(spec: &Self::Spec) -> sless_wire::Runtime {
        spec.runtime
    }
    fn set_spec(&mut self, spec: &Self::Spec, code: Option<CodeRef>) {
        self.spec = job_spec(spec, code);
    }
}

impl RestKind for SlessService {
    const NOUN: &'static str = "service";
    type Wire = sless_wire::Service;
    fn wire(&self) -> Result<Self::Wire> {
        service_to_wire(self)
    }
}

impl CodeKind for SlessService {
    const OWNER: OwnerKind = OwnerKind::Service;
    fn spec_secrets(spec: &Self::Spec) -> &sless_wire::SecretEnv {
        &spec.secret_env_vars
    }
    type Spec = sless_wire::ServiceSpec;
    fn code(&self) -> Option<&CodeRef> {
        self.spec.code.as_ref()
    }
    fn runtime(&self) -> Result<sless_wire::Runtime> {
        self.spec
            .runtime
            .parse()
            .map_err(|_| unknown_runtime("service", &self.name_any(), &self.spec.runtime))
    }
    fn wire_spec(&self) -> Result<Self::Spec> {
        Ok(service_to_wire(self)?.spec)
    }
    fn spec_runtime(spec: &Self::Spec) -> sless_wire::Runtime {
        spec.runtime
    }
    fn set_spec(&mut self, spec: &Self::Spec, code: Option<CodeRef>) {
        self.spec = SlessServiceSpec {
            code,
            ..SlessServiceSpec::from(spec)
        };
    }
}

/// Whether an update may change an object whose deletion has started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WhileDeleting {
    /// 409: it is being deleted.
    Refuse,
    /// Updated like any other.
    Allow,
}

/// Stamps [`UPDATED_AT`] with the current time.
fn stamp<K: kube::Resource>(obj: &mut K) {
    obj.annotations_mut().insert(UPDATED_AT.to_string(), now());
}

/// Where calls to a function or service (`noun`) in `phase` go: its Service
/// when `Ready`; 404 while it is being deleted; otherwise 503 naming the
/// phase and `message`.
fn ready_target(
    owner: OwnerKind,
    noun: &'static str,
    ns: &str,
    name: &str,
    (phase, message): (Phase, Option<String>),
    timeout_sec: u32,
) -> Result<InvokeTarget> {
    match phase {
        Phase::Ready => Ok(InvokeTarget {
            lease: None,
            client: None,
            base_url: builders::service_url(owner, ns, name),
            timeout: Duration::from_secs(u64::from(timeout_sec)),
        }),
        Phase::Deleting => Err(Error::NotFound {
            kind: noun,
            namespace: ns.to_string(),
            name: name.to_string(),
        }),
        other => Err(Error::NotReady(format!(
            "{noun} {name:?} is {}{}",
            other.as_str(),
            message.map(|m| format!(": {m}")).unwrap_or_default()
        ))),
    }
}

impl KubeBackend {
    /// A backend over `client` and `store` whose controllers are not started
    /// (the REST layer only; tests use it with a mock API server).
    pub fn new(client: Client, opts: KubeOptions, store: CodeStore) -> KubeBackend {
        let (shutdown, _) = watch::channel(false);
        KubeBackend {
            controllers: Arc::new(Controllers::new(client.clone(), opts.clone())),
            opts,
            store,
            shutdown,
            campaign: Mutex::new(None),
            ensured: Mutex::new(HashSet::new()),
            activity: Activity::with_default_throttle(client.clone()),
            activator: Activator::new(client.clone()),
            client,
        }
    }

    /// Connects with the in-cluster or `KUBECONFIG` configuration, opens the
    /// S3 store and runs the controllers: while this replica holds the leader
    /// Lease (`opts.leader_election`), else at once.
    pub async fn connect(opts: KubeOptions) -> Result<KubeBackend> {
        let client = Client::try_default()
            .await
            .map_err(|e| Error::Internal(format!("cannot reach the Kubernetes API: {e}")))?;
        let store = CodeStore::s3(&opts.s3).map_err(store_error)?;
        let backend = KubeBackend::new(client, opts, store);
        if backend.opts.leader_election {
            let leader = LeaderOptions::new(&backend.opts.operator_namespace);
            let task = tokio::spawn(backend.controllers.clone().lead(
                backend.client.clone(),
                leader,
                backend.shutdown.subscribe(),
            ));
            if let Ok(mut c) = backend.campaign.lock() {
                *c = Some(task);
            }
        } else {
            backend.start_controllers().await;
        }
        Ok(backend)
    }

    /// Starts the controllers now (no leader election); [`Backend::shutdown`]
    /// stops them.
    pub async fn start_controllers(&self) {
        self.controllers.start().await;
    }

    /// This replica's activity recorder (tests look at its leases).
    pub fn activity(&self) -> &Activity {
        &self.activity
    }

    /// The controllers' shared context (tests record metrics through it).
    pub fn controllers_ctx(&self) -> &Arc<Ctx> {
        self.controllers.ctx()
    }

    /// Reads `ns/name`, mapping API errors.
    async fn get_obj<K: RestKind>(&self, ns: &str, name: &str) -> Result<K> {
        Api::<K>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| map_kube_error(e, K::NOUN, ns, name))
    }

    /// Creates `obj` in `ns`, stamped with [`UPDATED_AT`] (API errors are
    /// left to the caller).
    async fn create_stamped<K: RestKind>(&self, ns: &str, mut obj: K) -> kube::Result<K> {
        stamp(&mut obj);
        Api::<K>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &obj)
            .await
    }

    /// Creates `obj` in `ns`; a 404 means the namespace is missing.
    /// Creates a resource with code and then the Secret of its secret env
    /// values (after, so a name that exists never has its Secret replaced;
    /// the pods start only after a code upload and a build). A failed Secret
    /// write removes the new resource again.
    async fn create_code_obj<K: CodeKind>(
        &self,
        ns: &str,
        name: &str,
        obj: K,
        spec: &K::Spec,
    ) -> Result<K::Wire> {
        let created = self.create_obj(ns, obj).await?;
        if K::spec_secrets(spec).is_empty() {
            return Ok(created);
        }
        if let Err(e) = self
            .write_env_secret(ns, K::OWNER, name, K::spec_secrets(spec))
            .await
        {
            let _ = self.delete_obj::<K>(ns, name).await;
            return Err(e);
        }
        Ok(created)
    }

    /// Writes (server-side apply) or removes the Secret `<workload>-env` in
    /// the deploy namespace when `s` carries values; nothing otherwise.
    async fn write_env_secret(
        &self,
        ns: &str,
        kind: OwnerKind,
        name: &str,
        s: &sless_wire::SecretEnv,
    ) -> Result<()> {
        let Some(values) = &s.values else {
            return Ok(());
        };
        let deploy_ns = names::deploy_namespace(ns);
        let secret_name = names::env_secret_name(kind, name);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &deploy_ns);
        if values.is_empty() {
            return match api.delete(&secret_name, &DeleteParams::background()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(e) => Err(map_kube_error(e, "secret", &deploy_ns, &secret_name)),
            };
        }
        let secret = builders::env_secret(kind, ns, name, values);
        api.patch(
            &secret_name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(|e| map_kube_error(e, "secret", &deploy_ns, &secret_name))?;
        Ok(())
    }

    async fn create_obj<K: RestKind>(&self, ns: &str, obj: K) -> Result<K::Wire> {
        let name = obj.meta().name.clone().unwrap_or_default();
        match self.create_stamped(ns, obj).await {
            Ok(created) => created.wire(),
            // The object is absent, so a 404 means the namespace is.
            Err(e) => Err(match map_kube_error(e, K::NOUN, ns, &name) {
                Error::NotFound { .. } => Error::NotFound {
                    kind: "namespace",
                    namespace: ns.to_string(),
                    name: ns.to_string(),
                },
                other => other,
            }),
        }
    }

    /// Lists `ns`'s objects of a kind in their wire form, sorted by name.
    async fn list_obj<K: RestKind>(&self, ns: &str) -> Result<Vec<K::Wire>> {
        let items = Api::<K>::namespaced(self.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| map_kube_error(e, K::NOUN, ns, ""))?
            .items;
        let mut out = items
            .iter()
            .map(|o| Ok((o.name_any(), o.wire()?)))
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out.into_iter().map(|(_, w)| w).collect())
    }

    /// Deletes `ns/name` (its finalizer cleans up the children).
    async fn delete_obj<K: RestKind>(&self, ns: &str, name: &str) -> Result<()> {
        Api::<K>::namespaced(self.client.clone(), ns)
            .delete(name, &DeleteParams::background())
            .await
            .map_err(|e| map_kube_error(e, K::NOUN, ns, name))?;
        Ok(())
    }

    /// Updates `ns/name` with optimistic concurrency: reads it (refused with
    /// a 409 while it is being deleted, when `deleting` says so), asks `next`
    /// for the changed object (`None`: nothing changes and nothing is
    /// written), stamps [`UPDATED_AT`], clears the status and replaces the
    /// object with the resourceVersion it was read at. A conflict (409)
    /// starts over, at most 5 times, then the update gives up with a 409.
    async fn update_obj<K, F, Fut>(
        &self,
        ns: &str,
        name: &str,
        deleting: WhileDeleting,
        mut next: F,
    ) -> Result<K::Wire>
    where
        K: RestKind,
        F: FnMut(K) -> Fut,
        Fut: Future<Output = Result<Option<K>>>,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let noun = K::NOUN;
        for _ in 0..5 {
            let obj = self.get_obj::<K>(ns, name).await?;
            if deleting == WhileDeleting::Refuse && obj.meta().deletion_timestamp.is_some() {
                return Err(Error::Conflict(format!("{noun} {name:?} is being deleted")));
            }
            let Some(mut changed) = next(obj.clone()).await? else {
                return obj.wire();
            };
            stamp(&mut changed);
            *changed.status_mut() = None;
            match api.replace(name, &PostParams::default(), &changed).await {
                Ok(updated) => return updated.wire(),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(map_kube_error(e, noun, ns, name)),
            }
        }
        Err(Error::Conflict(format!(
            "{noun} {name:?} kept changing; try again"
        )))
    }

    /// [`update_obj`](Self::update_obj) for a kind with code: `apply` turns
    /// the current wire spec into the next; the code stays, and when the
    /// runtime changes its build context is rebuilt from the same zip for
    /// the new runtime (a new code key).
    async fn update_spec<K, F, E>(
        &self,
        ns: &str,
        name: &str,
        deleting: WhileDeleting,
        apply: F,
    ) -> Result<K::Wire>
    where
        K: CodeKind,
        F: Fn(&K::Spec) -> std::result::Result<K::Spec, E>,
        Error: From<E>,
    {
        let apply = &apply;
        self.update_obj(ns, name, deleting, |mut obj: K| async move {
            let current = obj.wire_spec()?;
            let next = apply(&current)?;
            if next == current {
                return Ok(None);
            }
            // New secret values reach their Secret before the spec that
            // rolls the pods to read them.
            self.write_env_secret(ns, K::OWNER, name, K::spec_secrets(&next))
                .await?;
            let mut code = obj.code().cloned();
            let runtime = K::spec_runtime(&next);
            if runtime != K::spec_runtime(&current)
                && let Some(c) = code.as_mut()
            {
                c.key = self
                    .store
                    .rebuild_context(ns, &c.sha256, runtime)
                    .await
                    .map_err(store_error)?;
            }
            obj.set_spec(&next, code);
            Ok(Some(obj))
        })
        .await
    }

    /// Stores uploaded code for `ns/name` and points `spec.code` at it
    /// (merge patch, with [`UPDATED_AT`]); the code the object already has
    /// changes nothing (no write, no rebuild).
    async fn upload<K: CodeKind>(&self, ns: &str, name: &str, code: CodeBundle) -> Result<K::Wire> {
        let obj = self.get_obj::<K>(ns, name).await?;
        let runtime = obj.runtime()?;
        let key = objstore::context_key(ns, &code.sha256, runtime);
        if obj
            .code()
            .is_some_and(|c| c.key == key && c.source_hash == code.source_hash)
        {
            return obj.wire();
        }
        let key = self
            .store
            .put_code(ns, &code.sha256, code.zip, runtime)
            .await
            .map_err(store_error)?;
        let code = CodeRef {
            key,
            sha256: code.sha256,
            source_hash: code.source_hash,
        };
        let patch = serde_json::json!({
            "metadata": { "annotations": { UPDATED_AT: now() } },
            "spec": { "code": code },
        });
        Api::<K>::namespaced(self.client.clone(), ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| map_kube_error(e, K::NOUN, ns, name))?
            .wire()
    }

    /// The log of the kaniko (`build`) or run Job `job` in `ns`'s deploy
    /// namespace; empty when there is no such Job yet.
    async fn job_log(
        &self,
        ns: &str,
        job: Option<String>,
        container: &str,
        tail: Option<usize>,
    ) -> Result<String> {
        match job {
            Some(job) => {
                self.pod_log(
                    &names::deploy_namespace(ns),
                    &format!("job-name={job}"),
                    container,
                    tail,
                )
                .await
            }
            None => Ok(String::new()),
        }
    }

    /// A function's or service's log: its build (the kaniko Job in `build`)
    /// or its newest workload pod.
    async fn workload_log(
        &self,
        owner: OwnerKind,
        ns: &str,
        name: &str,
        build: Option<BuildStatus>,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        match kind {
            LogKind::Build => self.job_log(ns, build.map(|b| b.job), "kaniko", tail).await,
            LogKind::Run => {
                let selector =
                    format!("{}={}", names::APP_LABEL, names::workload_name(owner, name));
                self.pod_log(&names::deploy_namespace(ns), &selector, "function", tail)
                    .await
            }
        }
    }

    async fn copy_secret(&self, from: &str, to_ns: &str, to_name: &str) -> Result<()> {
        let src: Api<Secret> = Api::namespaced(self.client.clone(), &self.opts.operator_namespace);
        let secret = src.get(from).await.map_err(|e| {
            // A missing source secret is the operator's misconfiguration,
            // not the caller's fault: a 500 with a clear log line.
            Error::Internal(format!(
                "cannot read secret {}/{from} to copy into {to_ns}: {e}",
                self.opts.operator_namespace
            ))
        })?;
        let copy = Secret {
            metadata: ObjectMeta {
                name: Some(to_name.to_string()),
                namespace: Some(to_ns.to_string()),
                labels: Some(BTreeMap::from([(
                    names::MANAGED_BY.to_string(),
                    names::MANAGER.to_string(),
                )])),
                ..Default::default()
            },
            type_: secret.type_,
            data: secret.data,
            ..Default::default()
        };
        let dst: Api<Secret> = Api::namespaced(self.client.clone(), to_ns);
        dst.patch(
            to_name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&copy),
        )
        .await
        .map_err(|e| map_kube_error(e, "secret", to_ns, to_name))?;
        Ok(())
    }

    async fn pod_log(
        &self,
        ns: &str,
        selector: &str,
        container: &str,
        tail: Option<usize>,
    ) -> Result<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let list = pods
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| map_kube_error(e, "pod", ns, selector))?;
        let Some(pod) = list
            .items
            .into_iter()
            .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
        else {
            return Ok(String::new());
        };
        let lp = LogParams {
            container: Some(container.to_string()),
            tail_lines: tail.map(|t| t as i64),
            limit_bytes: Some(1024 * 1024),
            ..Default::default()
        };
        let name = pod.name_any();
        match pods.logs(&name, &lp).await {
            Ok(log) => Ok(log),
            // A pod that has not started has no log yet.
            Err(kube::Error::Api(s)) if s.code == 400 => Ok(String::new()),
            Err(e) => Err(map_kube_error(e, "pod", ns, &name)),
        }
    }
}

#[async_trait::async_trait]
impl Backend for KubeBackend {
    async fn ensure_namespace(&self, namespace: &str) -> Result<NamespaceInfo> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        let existed = nss
            .get_opt(namespace)
            .await
            .map_err(|e| map_kube_error(e, "namespace", namespace, namespace))?
            .is_some();
        let known = self.ensured.lock().is_ok_and(|e| e.contains(namespace));
        if existed && known {
            return Ok(NamespaceInfo {
                namespace: namespace.to_string(),
                created: false,
            });
        }
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        let deploy_ns = names::deploy_namespace(namespace);
        for ns in [
            builders::user_namespace(namespace),
            builders::deploy_namespace(namespace),
        ] {
            let n = ns.name_any();
            nss.patch(&n, &pp, &Patch::Apply(&ns))
                .await
                .map_err(|e| map_kube_error(e, "namespace", &n, &n))?;
        }
        let np: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &deploy_ns);
        np.patch(
            builders::NETWORK_POLICY,
            &pp,
            &Patch::Apply(&builders::network_policy(&self.opts, namespace)),
        )
        .await
        .map_err(|e| map_kube_error(e, "networkpolicy", &deploy_ns, builders::NETWORK_POLICY))?;
        if let Some(reg) = &self.opts.registry_secret {
            self.copy_secret(reg, &deploy_ns, builders::REGISTRY_SECRET)
                .await?;
        }
        self.copy_secret(
            &self.opts.object_store_secret,
            &deploy_ns,
            builders::OBJECT_STORE_SECRET,
        )
        .await?;
        if let Ok(mut e) = self.ensured.lock() {
            e.insert(namespace.to_string());
        }
        Ok(NamespaceInfo {
            namespace: namespace.to_string(),
            created: !existed,
        })
    }

    async fn create_function(
        &self,
        namespace: &str,
        name: &str,
        spec: sless_wire::function::FunctionSpec,
    ) -> Result<sless_wire::Function> {
        let obj = Function::new(name, FunctionSpec::from(&spec));
        self.create_code_obj(namespace, name, obj, &spec).await
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<sless_wire::Function> {
        self.get_obj::<Function>(namespace, name).await?.wire()
    }

    async fn list_functions(&self, namespace: &str) -> Result<Vec<sless_wire::Function>> {
        self.list_obj::<Function>(namespace).await
    }

    async fn update_function(
        &self,
        namespace: &str,
        name: &str,
        update: UpdateFunction,
    ) -> Result<sless_wire::Function> {
        self.update_spec::<Function, _, _>(namespace, name, WhileDeleting::Refuse, |s| {
            update.apply_to(s)
        })
        .await
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_obj::<Function>(namespace, name).await
    }

    async fn upload_code(
        &self,
        namespace: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<sless_wire::Function> {
        self.upload::<Function>(namespace, name, code).await
    }

    async fn read_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let f = self.get_obj::<Function>(namespace, name).await?;
        let build = f.status.and_then(|s| s.build);
        self.workload_log(OwnerKind::Function, namespace, name, build, kind, tail)
            .await
    }

    /// A Ready function's Service. With `min_instances = 0` the request is
    /// recorded as activity and holds a lease, and a function at zero
    /// (`status.instances` 0) is first woken: the request waits, at most
    /// `timeout_sec`, until its Deployment has an available replica (503
    /// naming what was seen last when it does not).
    async fn invoke_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        let f = self.get_obj::<Function>(namespace, name).await?.wire()?;
        let mut target = ready_target(
            OwnerKind::Function,
            Function::NOUN,
            namespace,
            name,
            (f.status.phase, f.status.message),
            f.spec.timeout_sec,
        )?;
        if f.spec.min_instances >= 1 {
            return Ok(target);
        }
        // Recorded first: it is what makes the controller scale up.
        self.activity.touch(namespace, name).await;
        if f.status.instances == 0 {
            let deploy_ns = names::deploy_namespace(namespace);
            let deployment = names::workload_name(OwnerKind::Function, name);
            self.activator
                .wait_available(&deploy_ns, &deployment, target.timeout)
                .await
                .map_err(|seen| {
                    Error::NotReady(format!(
                        "function {name:?} is scaling up from zero and did not serve within its timeout ({}s): {seen}",
                        f.spec.timeout_sec
                    ))
                })?;
        }
        target.lease = Some(self.activity.lease(namespace, name));
        Ok(target)
    }

    async fn create_trigger(
        &self,
        namespace: &str,
        name: &str,
        spec: sless_wire::TriggerSpec,
    ) -> Result<sless_wire::Trigger> {
        cron_schedule_runs_here(&spec)?;
        // Unlike the other kinds, a 404 here is reported as the trigger's.
        self.create_stamped(namespace, Trigger::new(name, trigger_spec(&spec)))
            .await
            .map_err(|e| map_kube_error(e, Trigger::NOUN, namespace, name))?
            .wire()
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<sless_wire::Trigger> {
        self.get_obj::<Trigger>(namespace, name).await?.wire()
    }

    async fn list_triggers(&self, namespace: &str) -> Result<Vec<sless_wire::Trigger>> {
        self.list_obj::<Trigger>(namespace).await
    }

    async fn update_trigger(
        &self,
        namespace: &str,
        name: &str,
        update: sless_wire::UpdateTrigger,
    ) -> Result<sless_wire::Trigger> {
        let update = &update;
        self.update_obj(
            namespace,
            name,
            WhileDeleting::Allow,
            |mut t: Trigger| async move {
                let current = t.wire()?.spec;
                let next = update.apply_to(&current)?;
                if next == current {
                    return Ok(None);
                }
                if next.schedule != current.schedule {
                    cron_schedule_runs_here(&next)?;
                }
                t.spec = trigger_spec(&next);
                Ok(Some(t))
            },
        )
        .await
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_obj::<Trigger>(namespace, name).await
    }

    async fn read_trigger_logs(
        &self,
        namespace: &str,
        name: &str,
        tail: Option<usize>,
    ) -> Result<String> {
        // The cron runs' curl output, from the newest run pod.
        self.get_obj::<Trigger>(namespace, name).await?;
        let selector = names::owner_selector(OwnerKind::Trigger, namespace, name);
        self.pod_log(&names::deploy_namespace(namespace), &selector, "call", tail)
            .await
    }

    async fn create_job(
        &self,
        namespace: &str,
        name: &str,
        spec: sless_wire::JobSpec,
    ) -> Result<sless_wire::Job> {
        let obj = FunctionJob::new(name, job_spec(&spec, None));
        self.create_code_obj(namespace, name, obj, &spec).await
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<sless_wire::Job> {
        self.get_obj::<FunctionJob>(namespace, name).await?.wire()
    }

    async fn list_jobs(&self, namespace: &str) -> Result<Vec<sless_wire::Job>> {
        self.list_obj::<FunctionJob>(namespace).await
    }

    async fn update_job(
        &self,
        namespace: &str,
        name: &str,
        update: sless_wire::UpdateJob,
    ) -> Result<sless_wire::Job> {
        self.update_spec::<FunctionJob, _, _>(namespace, name, WhileDeleting::Allow, |s| {
            update.apply_to(s)
        })
        .await
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_obj::<FunctionJob>(namespace, name).await
    }

    async fn upload_job_code(
        &self,
        namespace: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<sless_wire::Job> {
        self.upload::<FunctionJob>(namespace, name, code).await
    }

    async fn read_job_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let j = self.get_obj::<FunctionJob>(namespace, name).await?;
        let st = j.status.unwrap_or_default();
        let (job, container) = match kind {
            LogKind::Build => (st.build.map(|b| b.job), "kaniko"),
            LogKind::Run => (st.run, "function"),
        };
        self.job_log(namespace, job, container, tail).await
    }

    async fn create_service(
        &self,
        namespace: &str,
        name: &str,
        spec: sless_wire::ServiceSpec,
    ) -> Result<sless_wire::Service> {
        let obj = SlessService::new(name, SlessServiceSpec::from(&spec));
        self.create_code_obj(namespace, name, obj, &spec).await
    }

    async fn get_service(&self, namespace: &str, name: &str) -> Result<sless_wire::Service> {
        self.get_obj::<SlessService>(namespace, name).await?.wire()
    }

    async fn list_services(&self, namespace: &str) -> Result<Vec<sless_wire::Service>> {
        self.list_obj::<SlessService>(namespace).await
    }

    async fn update_service(
        &self,
        namespace: &str,
        name: &str,
        update: sless_wire::UpdateService,
    ) -> Result<sless_wire::Service> {
        self.update_spec::<SlessService, _, _>(namespace, name, WhileDeleting::Refuse, |s| {
            update.apply_to(s)
        })
        .await
    }

    async fn delete_service(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_obj::<SlessService>(namespace, name).await
    }

    async fn upload_service_code(
        &self,
        namespace: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<sless_wire::Service> {
        self.upload::<SlessService>(namespace, name, code).await
    }

    async fn read_service_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let v = self.get_obj::<SlessService>(namespace, name).await?;
        let build = v.status.and_then(|s| s.build);
        self.workload_log(OwnerKind::Service, namespace, name, build, kind, tail)
            .await
    }

    async fn service_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        let v = self
            .get_obj::<SlessService>(namespace, name)
            .await?
            .wire()?;
        ready_target(
            OwnerKind::Service,
            SlessService::NOUN,
            namespace,
            name,
            (v.status.phase, v.status.message),
            v.spec.timeout_sec,
        )
    }

    /// Whether this replica runs the controllers, then their reconcile series.
    fn metrics_text(&self) -> String {
        self.controllers.render_metrics()
    }

    async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let campaign = self.campaign.lock().ok().and_then(|mut c| c.take());
        match campaign {
            // Stops the controllers, then releases the lease.
            Some(task) => {
                if tokio::time::timeout(Duration::from_secs(15), task)
                    .await
                    .is_err()
                {
                    tracing::warn!("the leader campaign did not end within 15 s");
                }
            }
            None => self.controllers.stop().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;

    #[tokio::test]
    async fn metrics_text_has_the_reconcile_series_once_controllers_record() {
        // No request is made: the mock's handle is never answered.
        let (svc, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(svc, "default");
        let store = CodeStore::new(Arc::new(object_store::memory::InMemory::new()));
        let b = KubeBackend::new(client.clone(), KubeOptions::example(), store);
        let before = Backend::metrics_text(&b);
        assert!(
            before.contains("sless_controllers_running 0\n"),
            "not leading yet: {before}"
        );
        assert!(!before.contains("sless_reconciles_total{"), "{before}");
        let ctx = b.controllers_ctx().clone();
        ctx.metrics
            .record("trigger", Duration::from_millis(20), true);
        ctx.metrics
            .record("trigger", Duration::from_millis(30), false);
        let text = Backend::metrics_text(&b);
        assert!(
            text.contains("# TYPE sless_reconciles_total counter\n"),
            "{text}"
        );
        assert!(text.contains("sless_reconciles_total{controller=\"trigger\"} 2\n"));
        assert!(text.contains("sless_reconcile_failures_total{controller=\"trigger\"} 1\n"));
        assert!(text.contains("sless_reconcile_seconds_total{controller=\"trigger\"} 0.050000\n"));
    }
}
