//! [`KubeBackend`]: the REST API's [`Backend`] over custom resources. It
//! writes and reads `Function` objects in the user namespace, stores code in
//! the object store, and (when started with [`KubeBackend::connect`]) runs the
//! controllers that turn the objects into builds and Deployments.
//! API-server errors map to the API's: "invalid" → 400, "already exists" →
//! 409, not found → 404; never a 500 for input.

use super::KubeOptions;
use super::builders;
use super::controllers::Controllers;
use super::crd::{
    CodeRef, Function, FunctionJob, FunctionJobSpec, FunctionSpec, SlessService, SlessServiceSpec,
    Trigger, TriggerSpec,
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
use kube::{Client, ResourceExt};
use sless_wire::function::{FunctionStatus as WireStatus, LogKind, NamespaceInfo};
use sless_wire::{Phase, UpdateFunction, paths};
use std::collections::{BTreeMap, HashSet};
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
    let runtime = j.spec.runtime.parse().map_err(|_| {
        Error::Internal(format!(
            "job {} has an unknown runtime {:?}",
            j.name_any(),
            j.spec.runtime
        ))
    })?;
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
        input: s.input.clone(),
        run_id: s.run_id,
        memory_mb: s.memory_mb,
        timeout_sec: s.timeout_sec,
        code,
    }
}

/// The wire form of a sless Service object.
pub fn service_to_wire(v: &SlessService) -> Result<sless_wire::Service> {
    let spec = v.spec.to_wire().map_err(|r| {
        Error::Internal(format!(
            "service {} has an unknown runtime {r:?}",
            v.name_any()
        ))
    })?;
    let st = v.status.clone().unwrap_or_default();
    let phase = if v.metadata.deletion_timestamp.is_some() {
        Phase::Deleting
    } else {
        phase_of(st.phase.as_deref())
    };
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
    let spec = f.spec.to_wire().map_err(|runtime| {
        Error::Internal(format!(
            "function {ns}/{name} has an unknown runtime {runtime:?}"
        ))
    })?;
    let st = f.status.clone().unwrap_or_default();
    let phase = if f.metadata.deletion_timestamp.is_some() {
        Phase::Deleting
    } else {
        phase_of(st.phase.as_deref())
    };
    let created_at = f
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let updated_at = f
        .annotations()
        .get(UPDATED_AT)
        .cloned()
        .unwrap_or_else(|| created_at.clone());
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
        },
        namespace: ns,
        name,
        spec,
        created_at,
        updated_at,
    })
}

impl KubeBackend {
    /// A backend over `client` and `store` whose controllers are not started
    /// (the REST layer only; tests use it with a mock API server).
    pub fn new(client: Client, opts: KubeOptions, store: CodeStore) -> KubeBackend {
        let (shutdown, _) = watch::channel(false);
        KubeBackend {
            controllers: Arc::new(Controllers::new(client.clone(), opts.clone())),
            client,
            opts,
            store,
            shutdown,
            campaign: Mutex::new(None),
            ensured: Mutex::new(HashSet::new()),
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

    /// The controllers' shared context (tests record metrics through it).
    pub fn controllers_ctx(&self) -> &Arc<Ctx> {
        self.controllers.ctx()
    }

    fn triggers(&self, ns: &str) -> Api<Trigger> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Reads `kind ns/name`, mapping API errors.
    async fn get_obj<K>(&self, kind: &'static str, ns: &str, name: &str) -> Result<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| map_kube_error(e, kind, ns, name))
    }

    /// Creates `obj` in `ns`; a 404 means the namespace is missing.
    async fn create_obj<K>(&self, kind: &'static str, ns: &str, obj: &K) -> Result<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        Api::<K>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), obj)
            .await
            .map_err(|e| match map_kube_error(e, kind, ns, &name) {
                Error::NotFound { .. } => Error::NotFound {
                    kind: "namespace",
                    namespace: ns.to_string(),
                    name: ns.to_string(),
                },
                other => other,
            })
    }

    /// Lists `ns`'s objects of a kind.
    async fn list_obj<K>(&self, kind: &'static str, ns: &str) -> Result<Vec<K>>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Ok(Api::<K>::namespaced(self.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| map_kube_error(e, kind, ns, ""))?
            .items)
    }

    /// Deletes `kind ns/name` (its finalizer cleans up the children).
    async fn delete_obj<K>(&self, kind: &'static str, ns: &str, name: &str) -> Result<()>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.client.clone(), ns)
            .delete(name, &DeleteParams::background())
            .await
            .map_err(|e| map_kube_error(e, kind, ns, name))?;
        Ok(())
    }

    /// Stores code for `runtime` and returns the new spec `code`, or `None`
    /// when `current` already is this code (nothing to change).
    async fn store_code(
        &self,
        ns: &str,
        runtime: sless_wire::Runtime,
        current: Option<&CodeRef>,
        code: CodeBundle,
    ) -> Result<Option<CodeRef>> {
        let key = objstore::context_key(ns, &code.sha256, runtime);
        if current.is_some_and(|c| c.key == key && c.source_hash == code.source_hash) {
            return Ok(None);
        }
        let key = self
            .store
            .put_code(ns, &code.sha256, code.zip, runtime)
            .await
            .map_err(store_error)?;
        Ok(Some(CodeRef {
            key,
            sha256: code.sha256,
            source_hash: code.source_hash,
        }))
    }

    /// Merge-patches `spec.code` (and the updated-at annotation) of an object.
    async fn patch_code<K>(
        &self,
        kind: &'static str,
        ns: &str,
        name: &str,
        code: &CodeRef,
    ) -> Result<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let patch = serde_json::json!({
            "metadata": { "annotations": { UPDATED_AT: now() } },
            "spec": { "code": code },
        });
        Api::<K>::namespaced(self.client.clone(), ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| map_kube_error(e, kind, ns, name))
    }

    fn functions(&self, ns: &str) -> Api<Function> {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn get(&self, ns: &str, name: &str) -> Result<Function> {
        self.functions(ns)
            .get(name)
            .await
            .map_err(|e| map_kube_error(e, "function", ns, name))
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
        let mut f = Function::new(name, FunctionSpec::from(&spec));
        f.metadata.annotations = Some(BTreeMap::from([(UPDATED_AT.to_string(), now())]));
        let created = self
            .functions(namespace)
            .create(&PostParams::default(), &f)
            .await
            .map_err(|e| match map_kube_error(e, "function", namespace, name) {
                // The function is absent, so a 404 means the namespace is.
                Error::NotFound { .. } => Error::NotFound {
                    kind: "namespace",
                    namespace: namespace.to_string(),
                    name: namespace.to_string(),
                },
                other => other,
            })?;
        to_wire(&created)
    }

    async fn get_function(&self, namespace: &str, name: &str) -> Result<sless_wire::Function> {
        to_wire(&self.get(namespace, name).await?)
    }

    async fn list_functions(&self, namespace: &str) -> Result<Vec<sless_wire::Function>> {
        let list = self
            .functions(namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| map_kube_error(e, "function", namespace, ""))?;
        let mut out = list.items.iter().map(to_wire).collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn update_function(
        &self,
        namespace: &str,
        name: &str,
        update: UpdateFunction,
    ) -> Result<sless_wire::Function> {
        // Optimistic concurrency: replace with the read resourceVersion, retry on conflict.
        for _ in 0..5 {
            let mut f = self.get(namespace, name).await?;
            if f.metadata.deletion_timestamp.is_some() {
                return Err(Error::Conflict(format!(
                    "function {name:?} is being deleted"
                )));
            }
            let current = f
                .spec
                .to_wire()
                .map_err(|r| Error::Internal(format!("unknown runtime {r:?}")))?;
            let next = update.apply_to(&current)?;
            if next == current {
                return to_wire(&f);
            }
            let mut spec = FunctionSpec::from(&next);
            spec.code = f.spec.code.clone();
            if next.runtime != current.runtime
                && let Some(code) = spec.code.as_mut()
            {
                code.key = self
                    .store
                    .rebuild_context(namespace, &code.sha256, next.runtime)
                    .await
                    .map_err(store_error)?;
            }
            f.spec = spec;
            f.annotations_mut().insert(UPDATED_AT.to_string(), now());
            f.status = None;
            match self
                .functions(namespace)
                .replace(name, &PostParams::default(), &f)
                .await
            {
                Ok(updated) => return to_wire(&updated),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(map_kube_error(e, "function", namespace, name)),
            }
        }
        Err(Error::Conflict(format!(
            "function {name:?} kept changing; try again"
        )))
    }

    async fn delete_function(&self, namespace: &str, name: &str) -> Result<()> {
        self.functions(namespace)
            .delete(name, &DeleteParams::background())
            .await
            .map_err(|e| map_kube_error(e, "function", namespace, name))?;
        Ok(())
    }

    async fn upload_code(
        &self,
        namespace: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<sless_wire::Function> {
        let f = self.get(namespace, name).await?;
        let runtime = f
            .spec
            .runtime()
            .ok_or_else(|| Error::Internal(format!("unknown runtime {:?}", f.spec.runtime)))?;
        let key = objstore::context_key(namespace, &code.sha256, runtime);
        if f.spec
            .code
            .as_ref()
            .is_some_and(|c| c.key == key && c.source_hash == code.source_hash)
        {
            // The code the function already has: nothing changes, no rebuild.
            return to_wire(&f);
        }
        let key = self
            .store
            .put_code(namespace, &code.sha256, code.zip.clone(), runtime)
            .await
            .map_err(store_error)?;
        let patch = serde_json::json!({
            "metadata": { "annotations": { UPDATED_AT: now() } },
            "spec": { "code": CodeRef { key, sha256: code.sha256, source_hash: code.source_hash } },
        });
        let updated = self
            .functions(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| map_kube_error(e, "function", namespace, name))?;
        to_wire(&updated)
    }

    async fn read_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let f = self.get(namespace, name).await?;
        let deploy_ns = names::deploy_namespace(namespace);
        match kind {
            LogKind::Build => match f.status.and_then(|s| s.build) {
                Some(b) => {
                    self.pod_log(&deploy_ns, &format!("job-name={}", b.job), "kaniko", tail)
                        .await
                }
                None => Ok(String::new()),
            },
            LogKind::Run => {
                let selector = format!(
                    "{}={}",
                    names::APP_LABEL,
                    names::workload_name(OwnerKind::Function, name)
                );
                self.pod_log(&deploy_ns, &selector, "function", tail).await
            }
        }
    }

    async fn invoke_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        let f = to_wire(&self.get(namespace, name).await?)?;
        match f.status.phase {
            Phase::Ready => Ok(InvokeTarget {
                base_url: builders::service_url(OwnerKind::Function, namespace, name),
                timeout: Duration::from_secs(u64::from(f.spec.timeout_sec)),
            }),
            Phase::Deleting => Err(Error::function_not_found(namespace, name)),
            other => Err(Error::NotReady(format!(
                "function {name:?} is {}{}",
                other.as_str(),
                f.status
                    .message
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
        }
    }

    async fn create_trigger(
        &self,
        namespace: &str,
        name: &str,
        spec: sless_wire::TriggerSpec,
    ) -> Result<sless_wire::Trigger> {
        cron_schedule_runs_here(&spec)?;
        let mut t = Trigger::new(name, trigger_spec(&spec));
        t.metadata.annotations = Some(BTreeMap::from([(UPDATED_AT.to_string(), now())]));
        let created = self
            .triggers(namespace)
            .create(&PostParams::default(), &t)
            .await
            .map_err(|e| map_kube_error(e, "trigger", namespace, name))?;
        trigger_to_wire(&created)
    }

    async fn get_trigger(&self, namespace: &str, name: &str) -> Result<sless_wire::Trigger> {
        let t = self
            .triggers(namespace)
            .get(name)
            .await
            .map_err(|e| map_kube_error(e, "trigger", namespace, name))?;
        trigger_to_wire(&t)
    }

    async fn list_triggers(&self, namespace: &str) -> Result<Vec<sless_wire::Trigger>> {
        let list = self
            .triggers(namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| map_kube_error(e, "trigger", namespace, ""))?;
        let mut out = list
            .items
            .iter()
            .map(trigger_to_wire)
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn update_trigger(
        &self,
        namespace: &str,
        name: &str,
        update: sless_wire::UpdateTrigger,
    ) -> Result<sless_wire::Trigger> {
        for _ in 0..5 {
            let mut t = self
                .triggers(namespace)
                .get(name)
                .await
                .map_err(|e| map_kube_error(e, "trigger", namespace, name))?;
            let current = trigger_to_wire(&t)?.spec;
            let next = update.apply_to(&current)?;
            if next == current {
                return trigger_to_wire(&t);
            }
            if next.schedule != current.schedule {
                cron_schedule_runs_here(&next)?;
            }
            t.spec = trigger_spec(&next);
            t.annotations_mut().insert(UPDATED_AT.to_string(), now());
            t.status = None;
            match self
                .triggers(namespace)
                .replace(name, &PostParams::default(), &t)
                .await
            {
                Ok(updated) => return trigger_to_wire(&updated),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(map_kube_error(e, "trigger", namespace, name)),
            }
        }
        Err(Error::Conflict(format!(
            "trigger {name:?} kept changing; try again"
        )))
    }

    async fn delete_trigger(&self, namespace: &str, name: &str) -> Result<()> {
        self.triggers(namespace)
            .delete(name, &DeleteParams::background())
            .await
            .map_err(|e| map_kube_error(e, "trigger", namespace, name))?;
        Ok(())
    }

    async fn read_trigger_logs(
        &self,
        namespace: &str,
        name: &str,
        tail: Option<usize>,
    ) -> Result<String> {
        // The cron runs' curl output, from the newest run pod.
        self.triggers(namespace)
            .get(name)
            .await
            .map_err(|e| map_kube_error(e, "trigger", namespace, name))?;
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
        let mut j = FunctionJob::new(name, job_spec(&spec, None));
        j.metadata.annotations = Some(BTreeMap::from([(UPDATED_AT.to_string(), now())]));
        job_to_wire(&self.create_obj("job", namespace, &j).await?)
    }

    async fn get_job(&self, namespace: &str, name: &str) -> Result<sless_wire::Job> {
        job_to_wire(&self.get_obj::<FunctionJob>("job", namespace, name).await?)
    }

    async fn list_jobs(&self, namespace: &str) -> Result<Vec<sless_wire::Job>> {
        let mut out = self
            .list_obj::<FunctionJob>("job", namespace)
            .await?
            .iter()
            .map(job_to_wire)
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn update_job(
        &self,
        namespace: &str,
        name: &str,
        update: sless_wire::UpdateJob,
    ) -> Result<sless_wire::Job> {
        let api: Api<FunctionJob> = Api::namespaced(self.client.clone(), namespace);
        for _ in 0..5 {
            let mut j = self.get_obj::<FunctionJob>("job", namespace, name).await?;
            let current = job_to_wire(&j)?.spec;
            let next = update.apply_to(&current)?;
            if next == current {
                return job_to_wire(&j);
            }
            let mut code = j.spec.code.clone();
            if next.runtime != current.runtime
                && let Some(c) = code.as_mut()
            {
                c.key = self
                    .store
                    .rebuild_context(namespace, &c.sha256, next.runtime)
                    .await
                    .map_err(store_error)?;
            }
            j.spec = job_spec(&next, code);
            j.annotations_mut().insert(UPDATED_AT.to_string(), now());
            j.status = None;
            match api.replace(name, &PostParams::default(), &j).await {
                Ok(updated) => return job_to_wire(&updated),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(map_kube_error(e, "job", namespace, name)),
            }
        }
        Err(Error::Conflict(format!(
            "job {name:?} kept changing; try again"
        )))
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_obj::<FunctionJob>("job", namespace, name).await
    }

    async fn upload_job_code(
        &self,
        namespace: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<sless_wire::Job> {
        let j = self.get_obj::<FunctionJob>("job", namespace, name).await?;
        let runtime = job_to_wire(&j)?.spec.runtime;
        match self
            .store_code(namespace, runtime, j.spec.code.as_ref(), code)
            .await?
        {
            None => job_to_wire(&j),
            Some(c) => job_to_wire(
                &self
                    .patch_code::<FunctionJob>("job", namespace, name, &c)
                    .await?,
            ),
        }
    }

    async fn read_job_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let j = self.get_obj::<FunctionJob>("job", namespace, name).await?;
        let st = j.status.unwrap_or_default();
        let (job, container) = match kind {
            LogKind::Build => (st.build.map(|b| b.job), "kaniko"),
            LogKind::Run => (st.run, "function"),
        };
        match job {
            Some(job) => {
                self.pod_log(
                    &names::deploy_namespace(namespace),
                    &format!("job-name={job}"),
                    container,
                    tail,
                )
                .await
            }
            None => Ok(String::new()),
        }
    }

    async fn create_service(
        &self,
        namespace: &str,
        name: &str,
        spec: sless_wire::ServiceSpec,
    ) -> Result<sless_wire::Service> {
        let mut v = SlessService::new(name, SlessServiceSpec::from(&spec));
        v.metadata.annotations = Some(BTreeMap::from([(UPDATED_AT.to_string(), now())]));
        service_to_wire(&self.create_obj("service", namespace, &v).await?)
    }

    async fn get_service(&self, namespace: &str, name: &str) -> Result<sless_wire::Service> {
        service_to_wire(
            &self
                .get_obj::<SlessService>("service", namespace, name)
                .await?,
        )
    }

    async fn list_services(&self, namespace: &str) -> Result<Vec<sless_wire::Service>> {
        let mut out = self
            .list_obj::<SlessService>("service", namespace)
            .await?
            .iter()
            .map(service_to_wire)
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn update_service(
        &self,
        namespace: &str,
        name: &str,
        update: sless_wire::UpdateService,
    ) -> Result<sless_wire::Service> {
        let api: Api<SlessService> = Api::namespaced(self.client.clone(), namespace);
        for _ in 0..5 {
            let mut v = self
                .get_obj::<SlessService>("service", namespace, name)
                .await?;
            if v.metadata.deletion_timestamp.is_some() {
                return Err(Error::Conflict(format!(
                    "service {name:?} is being deleted"
                )));
            }
            let current = service_to_wire(&v)?.spec;
            let next = update.apply_to(&current)?;
            if next == current {
                return service_to_wire(&v);
            }
            let mut spec = SlessServiceSpec::from(&next);
            spec.code = v.spec.code.clone();
            if next.runtime != current.runtime
                && let Some(c) = spec.code.as_mut()
            {
                c.key = self
                    .store
                    .rebuild_context(namespace, &c.sha256, next.runtime)
                    .await
                    .map_err(store_error)?;
            }
            v.spec = spec;
            v.annotations_mut().insert(UPDATED_AT.to_string(), now());
            v.status = None;
            match api.replace(name, &PostParams::default(), &v).await {
                Ok(updated) => return service_to_wire(&updated),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(map_kube_error(e, "service", namespace, name)),
            }
        }
        Err(Error::Conflict(format!(
            "service {name:?} kept changing; try again"
        )))
    }

    async fn delete_service(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete_obj::<SlessService>("service", namespace, name)
            .await
    }

    async fn upload_service_code(
        &self,
        namespace: &str,
        name: &str,
        code: CodeBundle,
    ) -> Result<sless_wire::Service> {
        let v = self
            .get_obj::<SlessService>("service", namespace, name)
            .await?;
        let runtime = service_to_wire(&v)?.spec.runtime;
        match self
            .store_code(namespace, runtime, v.spec.code.as_ref(), code)
            .await?
        {
            None => service_to_wire(&v),
            Some(c) => service_to_wire(
                &self
                    .patch_code::<SlessService>("service", namespace, name, &c)
                    .await?,
            ),
        }
    }

    async fn read_service_logs(
        &self,
        namespace: &str,
        name: &str,
        kind: LogKind,
        tail: Option<usize>,
    ) -> Result<String> {
        let v = self
            .get_obj::<SlessService>("service", namespace, name)
            .await?;
        let deploy_ns = names::deploy_namespace(namespace);
        match kind {
            LogKind::Build => match v.status.and_then(|s| s.build) {
                Some(b) => {
                    self.pod_log(&deploy_ns, &format!("job-name={}", b.job), "kaniko", tail)
                        .await
                }
                None => Ok(String::new()),
            },
            LogKind::Run => {
                let selector = format!(
                    "{}={}",
                    names::APP_LABEL,
                    names::workload_name(OwnerKind::Service, name)
                );
                self.pod_log(&deploy_ns, &selector, "function", tail).await
            }
        }
    }

    async fn service_target(&self, namespace: &str, name: &str) -> Result<InvokeTarget> {
        let v = service_to_wire(
            &self
                .get_obj::<SlessService>("service", namespace, name)
                .await?,
        )?;
        match v.status.phase {
            Phase::Ready => Ok(InvokeTarget {
                base_url: builders::service_url(OwnerKind::Service, namespace, name),
                timeout: Duration::from_secs(u64::from(v.spec.timeout_sec)),
            }),
            Phase::Deleting => Err(Error::NotFound {
                kind: "service",
                namespace: namespace.to_string(),
                name: name.to_string(),
            }),
            other => Err(Error::NotReady(format!(
                "service {name:?} is {}{}",
                other.as_str(),
                v.status
                    .message
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
        }
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
