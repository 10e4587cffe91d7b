//! The `sless_function` resource: validation, plan modification (a diff when
//! and only when something changed), and create/read/update/delete against
//! the operator with waits until the function is Ready or gone.

use crate::client::chain;
use crate::code::{self, package, plan_hash};
use crate::fields::{self, Fetched, api_error, attr, env_at_apply, opt};
use crate::provider::{Configured, Shared};
use crate::secrets::{self, SecretFields};
use crate::wait::{self, WaitError};
use serde::{Deserialize, Serialize};
use sless_wire::{CreateFunction, Function, Runtime, UpdateFunction};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tf_provider::RawValue;
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

/// How many build-log lines a failure diagnostic carries.
pub const BUILD_LOG_TAIL_LINES: usize = 30;

/// The phase of a healthy function, as stored in state.
const READY: &str = "Ready";

/// State of `resource "sless_function"`; field names equal attribute names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionState {
    /// `<namespace>/<name>`.
    #[serde(default)]
    pub id: Value<String>,
    /// Function name (DNS-1123 label). Changing it replaces the function.
    #[serde(default)]
    pub name: Value<String>,
    /// Runtime, e.g. `python3.11`.
    #[serde(default)]
    pub runtime: Value<String>,
    /// `module.function`.
    #[serde(default)]
    pub entrypoint: Value<String>,
    /// Folder with the function's code.
    #[serde(default)]
    pub source_dir: Value<String>,
    /// Environment variables.
    #[serde(default)]
    pub env_vars: Value<BTreeMap<String, Value<String>>>,
    /// Secret environment variables (sensitive).
    #[serde(default)]
    pub secret_env_vars: fields::EnvMap,
    /// The operator's fingerprint of `secret_env_vars`.
    #[serde(default)]
    pub secret_env_vars_hash: Value<String>,
    /// Write-only secrets: set in configuration, null in plan and state.
    #[serde(default)]
    pub secret_env_vars_wo: fields::EnvMap,
    /// Changing it sends `secret_env_vars_wo` again.
    #[serde(default)]
    pub secret_env_vars_version: Value<i64>,
    /// Memory limit in MiB.
    #[serde(default)]
    pub memory_mb: Value<i64>,
    /// Per-invocation timeout in seconds.
    #[serde(default)]
    pub timeout_sec: Value<i64>,
    /// Processes kept when idle: 0 scales to zero, 1 keeps one up.
    #[serde(default)]
    pub min_instances: Value<i64>,
    /// Seconds without a request before scaling to zero.
    #[serde(default)]
    pub idle_timeout_sec: Value<i64>,
    /// How long apply waits, in seconds.
    #[serde(default)]
    pub wait_timeout_sec: Value<i64>,
    /// The namespace the function lives in.
    #[serde(default)]
    pub namespace: Value<String>,
    /// sha256 of the normalised content of `source_dir`.
    #[serde(default)]
    pub code_hash: Value<String>,
    /// Lifecycle phase.
    #[serde(default)]
    pub phase: Value<String>,
    /// Image reference of the last build.
    #[serde(default)]
    pub image_ref: Value<String>,
    /// Authenticated invoke URL.
    #[serde(default)]
    pub invoke_url: Value<String>,
    /// RFC 3339 time of the last successful build.
    #[serde(default)]
    pub last_built_at: Value<String>,
}

/// Attributes only the provider sets; configuring them is an error.
const COMPUTED_ONLY: [&str; 8] = [
    "id",
    "secret_env_vars_hash",
    "namespace",
    "code_hash",
    "phase",
    "image_ref",
    "invoke_url",
    "last_built_at",
];

impl FunctionState {
    /// The secret attributes, for [`secrets`].
    fn secret_fields(&self) -> SecretFields<'_> {
        SecretFields {
            secrets: &self.secret_env_vars,
            hash: &self.secret_env_vars_hash,
            write_only: &self.secret_env_vars_wo,
            version: &self.secret_env_vars_version,
        }
    }

    fn computed_only(&self, name: &str) -> &Value<String> {
        match name {
            "id" => &self.id,
            "secret_env_vars_hash" => &self.secret_env_vars_hash,
            "namespace" => &self.namespace,
            "code_hash" => &self.code_hash,
            "phase" => &self.phase,
            "image_ref" => &self.image_ref,
            "invoke_url" => &self.invoke_url,
            _ => &self.last_built_at,
        }
    }

    /// Marks the attributes a build changes as unknown.
    fn unknown_build_outputs(&mut self) {
        self.phase = Value::Unknown;
        self.image_ref = Value::Unknown;
        self.last_built_at = Value::Unknown;
    }

    /// Turns every unknown into null (a state returned with an error must be
    /// fully known).
    fn resolve_unknowns(mut self) -> Self {
        fields::unknowns_to_null([
            &mut self.id,
            &mut self.secret_env_vars_hash,
            &mut self.namespace,
            &mut self.code_hash,
            &mut self.phase,
            &mut self.image_ref,
            &mut self.invoke_url,
            &mut self.last_built_at,
        ]);
        fields::unknowns_to_null([
            &mut self.memory_mb,
            &mut self.timeout_sec,
            &mut self.min_instances,
            &mut self.idle_timeout_sec,
        ]);
        self
    }

    /// Copies what the operator reports into the computed attributes.
    fn fill_from(mut self, f: &Function, invoke_url: String) -> Self {
        self.id = Value::Value(format!("{}/{}", f.namespace, f.name));
        self.secret_env_vars_hash =
            secrets::hash_for_state(self.secret_fields(), &f.spec.secret_env_vars);
        self.namespace = Value::Value(f.namespace.clone());
        self.phase = Value::Value(f.status.phase.as_str().to_string());
        self.image_ref = opt(&f.status.image_ref);
        self.last_built_at = opt(&f.status.last_built_at);
        self.invoke_url = Value::Value(invoke_url);
        self.memory_mb = Value::Value(i64::from(f.spec.memory_mb));
        self.timeout_sec = Value::Value(i64::from(f.spec.timeout_sec));
        self.min_instances = Value::Value(i64::from(f.spec.min_instances));
        self.idle_timeout_sec = Value::Value(i64::from(f.spec.idle_timeout_sec));
        self
    }
}

/// The `sless_function` resource.
#[derive(Debug, Clone)]
pub struct FunctionResource {
    shared: Shared,
}

impl FunctionResource {
    /// A resource reading the provider's configuration from `shared`.
    pub fn new(shared: Shared) -> Self {
        FunctionResource { shared }
    }

    /// Plans `id`, `namespace` and `invoke_url` of a function about to be
    /// created: known once the provider is configured and the name is known.
    fn plan_location(&self, planned: &mut FunctionState) {
        let c = self.shared.try_get();
        (planned.id, planned.namespace) = fields::plan_location(c.as_deref(), &planned.name);
        planned.invoke_url = match (c, &planned.name) {
            (Some(c), Value::Value(name)) => Value::Value(c.client.invoke_url(&c.namespace, name)),
            _ => Value::Unknown,
        };
    }

    fn wait_timeout(state: &FunctionState, c: &Configured) -> Duration {
        fields::wait_timeout(&state.wait_timeout_sec, c.wait_timeout)
    }

    /// Waits for Ready (running `code_sha256` when given) and merges the
    /// function last seen into `state` (with `url`). A failure becomes a
    /// diagnostic that carries the phase, the operator's message and the last
    /// lines of the build log, and leaves no unknowns in the state.
    async fn wait_ready(
        diags: &mut Diagnostics,
        c: &Configured,
        state: FunctionState,
        code_sha256: Option<&str>,
        url: String,
    ) -> FunctionState {
        let ns = fields::namespace_of(&state.namespace, c);
        let name = state.name.as_ref_option().cloned().unwrap_or_default();
        let timeout = Self::wait_timeout(&state, c);
        let (last, ok) = match wait::until_ready(&c.client, &ns, &name, code_sha256, timeout).await
        {
            Ok(f) => (Some(f), true),
            Err(WaitError::Failed {
                message, function, ..
            }) => {
                let log = code::build_log::<Function>(c, &ns, &name, BUILD_LOG_TAIL_LINES).await;
                diags.root_error(
                    format!("Function {name} failed: phase Failed"),
                    format!(
                        "Function {name} (runtime {}, entrypoint {}) is in phase Failed: {}\n\nLast {BUILD_LOG_TAIL_LINES} lines of the build log:\n{}",
                        function.spec.runtime,
                        function.spec.entrypoint,
                        message.as_deref().unwrap_or("no message"),
                        log.trim_end()
                    ),
                );
                (Some(*function), false)
            }
            Err(e @ WaitError::Timeout { .. }) => {
                let last = match &e {
                    WaitError::Timeout { function, .. } => function.as_deref().cloned(),
                    _ => None,
                };
                diags.root_error(
                    format!("Timed out waiting for function {name}"),
                    e.to_string(),
                );
                (last, false)
            }
            Err(e) => {
                diags.root_error(format!("Error waiting for function {name}"), chain(&e));
                (None, false)
            }
        };
        let mut state = state;
        if let Some(f) = &last {
            state = state.fill_from(f, url);
        }
        if ok { state } else { state.resolve_unknowns() }
    }
}

/// Wire name of a runtime.
fn runtime_str(r: Runtime) -> String {
    r.as_str().to_string()
}

#[async_trait::async_trait]
impl Resource for FunctionResource {
    type State<'a> = FunctionState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::{Computed, Optional, OptionalComputed, Required};
        use AttributeType::{Map, Number, String};
        let runtimes = Runtime::list();
        Some(Schema {
            version: crate::state_upgrade::SCHEMA_VERSION,
            block: Block {
                version: 1,
                attributes: secrets::with_schema_attributes(
                    "restarts the function without a rebuild",
                    tf_provider::map! {
                        "name" => attr(String, Required, "Function name: a DNS-1123 label (1-63 lowercase letters, digits and `-`). Changing it replaces the function."),
                        "runtime" => attr(String, Required, &format!("Language runtime, one of: {runtimes}. Changing it rebuilds the function in place.")),
                        "entrypoint" => attr(String, Required, "`module.function`: `main.handler` (Python: dotted module path; Node.js: file path without extension). Changing it restarts the function without a rebuild."),
                        "source_dir" => attr(String, Required, "Folder with the function's code, e.g. `\"${path.module}/src\"`. Zipped deterministically; `requirements.txt` / `package.json` are installed at build time."),
                        "env_vars" => attr(Map(Box::new(String)), Optional, "Environment variables given to the function. Names starting with `SLESS_` are reserved. Changing them restarts the function without a rebuild."),
                        "secret_env_vars" => fields::sensitive_attr(Map(Box::new(String)), Optional, "Secret environment variables given to the function (sensitive: never shown in plans). The operator stores them apart (a file with mode 0600 on the local backend) and never returns them: it answers with their names and `secret_env_vars_hash`. Names follow the `env_vars` rules and cannot also be in `env_vars`. Changing them restarts the function without a rebuild."),
                        "secret_env_vars_hash" => attr(String, Computed, "The operator's fingerprint of `secret_env_vars` (sha256 over the names and values): a value changed outside Terraform shows here as drift and plans an in-place update. Null without secrets."),
                        "memory_mb" => attr(Number, OptionalComputed, "Memory limit in MiB, 64-4096 (default 128)."),
                        "timeout_sec" => attr(Number, OptionalComputed, "Per-invocation timeout in seconds, 1-900 (default 30)."),
                        "min_instances" => attr(Number, OptionalComputed, "Processes kept running when the function is idle: `0` (default) stops its process after `idle_timeout_sec` without a request, and the next request starts it again (a cold start, held until the process is ready); `1` keeps one process always up. Changing it applies without a restart."),
                        "idle_timeout_sec" => attr(Number, OptionalComputed, "Seconds without a request before a function with `min_instances = 0` stops its process, 1-86400 (default 300). Changing it applies without a restart."),
                        "wait_timeout_sec" => attr(Number, Optional, "How long create, update and delete wait for the function, in seconds. Defaults to the provider's `wait_timeout_sec` (600)."),
                        "id" => attr(String, Computed, "`<namespace>/<name>`."),
                        "namespace" => attr(String, Computed, "The namespace the function lives in, derived from the token's `sub`."),
                        "code_hash" => attr(String, Computed, "sha256 of the normalised content of `source_dir`, computed at plan time. A change rebuilds the function."),
                        "phase" => attr(String, Computed, "Lifecycle phase: Pending, Building, Ready, Failed or Deleting."),
                        "image_ref" => attr(String, Computed, "Reference of the built image, where the backend has one."),
                        "invoke_url" => attr(String, Computed, "The authenticated invoke endpoint: send requests with `Authorization: Bearer <token>`."),
                        "last_built_at" => attr(String, Computed, "RFC 3339 time the last successful build finished.")
                    },
                ),
                description: Description::markdown(
                    "A serverless function built from a folder of Python or Node.js code.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        fields::check_computed_only(diags, &COMPUTED_ONLY, |n| {
            !config.computed_only(n).is_null()
        });
        fields::check_name(diags, "function", &config.name);
        fields::check_entrypoint(diags, &config.runtime, &config.entrypoint);
        fields::check_limits(
            diags,
            config.memory_mb,
            config.timeout_sec,
            config.wait_timeout_sec,
        );
        fields::check_scaling(diags, config.min_instances, config.idle_timeout_sec);
        fields::check_env_vars(diags, &config.env_vars);
        fields::check_secret_env_vars(diags, &config.secret_env_vars, &config.env_vars);
        secrets::check_config(diags, config.secret_fields(), &config.env_vars);
        fields::check_source_dir(diags, &config.source_dir);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let fetched =
            fields::fetch::<Function>(diags, &self.shared, &state.namespace, &state.name).await;
        let (c, f) = match fetched {
            Fetched::Found(c, f) => (c, f),
            // Deleted outside Terraform: drop it from state so the plan recreates it.
            Fetched::Gone => return None,
            Fetched::Keep => return Some((state, private)),
        };
        let mut s = state;
        s.runtime = Value::Value(runtime_str(f.spec.runtime));
        s.entrypoint = Value::Value(f.spec.entrypoint.clone());
        s.env_vars = fields::env_from_api(&f.spec.env_vars, &s.env_vars);
        if let Some(h) = &f.status.source_hash {
            s.code_hash = Value::Value(h.clone());
        }
        let url = c.client.invoke_url(&f.namespace, &f.name);
        Some((s.fill_from(&f, url), private))
    }

    async fn plan_create<'a>(
        &self,
        diags: &mut Diagnostics,
        proposed: Self::State<'a>,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let mut planned = proposed;
        apply_defaults(&mut planned, &config);
        secrets::check_terraform(diags, &self.shared, config.secret_fields());
        planned.code_hash = plan_hash(diags, &planned.source_dir)?;
        planned.secret_env_vars_wo = secrets::planned_write_only();
        planned.secret_env_vars_hash = secrets::planned_hash(planned.secret_fields());
        planned.unknown_build_outputs();
        // Where the function will live is known as soon as the provider is
        // configured and the name is known.
        self.plan_location(&mut planned);
        Some((planned, Value::Null))
    }

    async fn plan_update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        proposed: Self::State<'a>,
        config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let mut planned = proposed;
        apply_defaults(&mut planned, &config);
        secrets::check_terraform(diags, &self.shared, config.secret_fields());
        planned.code_hash = plan_hash(diags, &planned.source_dir)?;
        planned.secret_env_vars_wo = secrets::planned_write_only();
        planned.secret_env_vars_hash = secrets::planned_hash(planned.secret_fields());
        let mut replace = Vec::new();
        if planned.name != prior.name {
            replace.push(AttributePath::new("name"));
        }
        // A token for another user maps to another namespace: a new function.
        let c = self.shared.try_get();
        if let Some(ns) = fields::other_namespace(c.as_deref(), &prior.namespace) {
            planned.namespace = Value::Value(ns);
            replace.push(AttributePath::new("namespace"));
        }
        if !replace.is_empty() {
            self.plan_location(&mut planned);
            planned.unknown_build_outputs();
        } else if planned.code_hash != prior.code_hash
            || planned.runtime != prior.runtime
            || prior.phase.as_ref_option().map(String::as_str) != Some(READY)
        {
            // New code, a new runtime, or a function that is not healthy: rebuild.
            planned.unknown_build_outputs();
        }
        Some((planned, private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::PrivateState<'a>> {
        Some(private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: Self::State<'a>,
        config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let c: Arc<Configured> = self.shared.get(diags)?;
        secrets::check_terraform(diags, &self.shared, config.secret_fields());
        if !diags.errors.is_empty() {
            return None;
        }
        let pkg = package(diags, &planned.source_dir, &planned.code_hash)?;
        let name = planned.name.as_ref_option().cloned().unwrap_or_default();
        let env = env_at_apply(diags, &planned.env_vars)?;
        let body = CreateFunction {
            name: Some(name.clone()),
            runtime: planned.runtime.as_ref_option().cloned(),
            entrypoint: planned.entrypoint.as_ref_option().cloned(),
            env_vars: env,
            secret_env_vars: secrets::at_create(
                diags,
                planned.secret_fields(),
                config.secret_fields(),
            )?,
            memory_mb: planned.memory_mb.as_ref_option().copied(),
            timeout_sec: planned.timeout_sec.as_ref_option().copied(),
            min_instances: planned.min_instances.as_ref_option().copied(),
            idle_timeout_sec: planned.idle_timeout_sec.as_ref_option().copied(),
        };
        let created = match fields::create::<Function>(diags, &c, &name, &body).await {
            Ok(created) => created,
            Err(fields::NotCreated::Refused) => return None,
            Err(fields::NotCreated::AnswerLost) => {
                // Tracked as tainted: the next apply replaces what was stored.
                let mut state = planned;
                (state.id, state.namespace) = fields::plan_location(Some(&c), &state.name);
                return Some((state.resolve_unknowns(), private));
            }
        };
        let url = c.client.invoke_url(&c.namespace, &name);
        let state = planned.fill_from(&created, url.clone());
        // From here on the function exists: always return a state so
        // Terraform tracks it (tainted when there are errors).
        let sha = pkg.sha256.clone();
        if code::upload::<Function>(diags, &c, &c.namespace, &name, pkg)
            .await
            .is_none()
        {
            return Some((state.resolve_unknowns(), private));
        }
        let state = Self::wait_ready(diags, &c, state, Some(&sha), url).await;
        Some((state, private))
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        planned: Self::State<'a>,
        config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let c: Arc<Configured> = self.shared.get(diags)?;
        secrets::check_terraform(diags, &self.shared, config.secret_fields());
        if !diags.errors.is_empty() {
            return None;
        }
        let name = planned.name.as_ref_option().cloned().unwrap_or_default();
        let ns = fields::namespace_of(&prior.namespace, &c);
        let patch = UpdateFunction {
            runtime: fields::changed(&planned.runtime, &prior.runtime),
            entrypoint: fields::changed(&planned.entrypoint, &prior.entrypoint),
            env_vars: if planned.env_vars != prior.env_vars {
                Some(env_at_apply(diags, &planned.env_vars)?)
            } else {
                None
            },
            secret_env_vars: secrets::at_update(
                diags,
                prior.secret_fields(),
                planned.secret_fields(),
                config.secret_fields(),
            )?,
            memory_mb: fields::changed(&planned.memory_mb, &prior.memory_mb),
            timeout_sec: fields::changed(&planned.timeout_sec, &prior.timeout_sec),
            min_instances: fields::changed(&planned.min_instances, &prior.min_instances),
            idle_timeout_sec: fields::changed(&planned.idle_timeout_sec, &prior.idle_timeout_sec),
        };
        let upload = planned.code_hash != prior.code_hash
            || prior.phase.as_ref_option().map(String::as_str) != Some(READY);
        let pkg = if upload {
            Some(package(diags, &planned.source_dir, &planned.code_hash)?)
        } else {
            None
        };
        let url = c.client.invoke_url(&ns, &name);
        let mut state = planned;
        state.namespace = Value::Value(ns.clone());
        if patch != UpdateFunction::default() {
            let f = fields::update::<Function>(diags, &c, &ns, &name, &patch).await?;
            state = state.fill_from(&f, url.clone());
        }
        let mut sha = None;
        if let Some(p) = pkg {
            let zip_sha = p.sha256.clone();
            let Some(f) = code::upload::<Function>(diags, &c, &ns, &name, p).await else {
                // The spec may have changed: record what is known.
                let mut s = state.resolve_unknowns();
                s.code_hash = prior.code_hash.clone();
                return Some((s, private));
            };
            state = state.fill_from(&f, url.clone());
            sha = Some(zip_sha);
        }
        let state = Self::wait_ready(diags, &c, state, sha.as_deref(), url).await;
        Some((state, private))
    }

    async fn upgrade<'a>(
        &self,
        diags: &mut Diagnostics,
        version: i64,
        prior_state: RawValue,
    ) -> Option<Self::State<'a>> {
        crate::state_upgrade::upgrade_resource(
            diags,
            "sless_function",
            version,
            &prior_state,
            &self.shared,
        )
    }

    async fn import<'a>(
        &self,
        diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        // `<namespace>/<name>` or `<name>`; `read` fills in the rest from
        // the operator (`source_dir` stays null: the first plan sets it).
        let c = self.shared.get(diags)?;
        let name = fields::import_name(diags, &c, "sless_function", &id)?;
        let state = FunctionState {
            name: Value::Value(name.clone()),
            namespace: Value::Value(c.namespace.clone()),
            ..Default::default()
        };
        match self.read(diags, state, Value::Null, Value::Null).await {
            Some(imported) if diags.errors.is_empty() => Some(imported),
            Some(_) => None,
            None => {
                fields::import_missing(diags, "function", &name, &c.namespace);
                None
            }
        }
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        _private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        let c = self.shared.get(diags)?;
        let name = prior.name.as_ref_option().cloned().unwrap_or_default();
        let ns = fields::namespace_of(&prior.namespace, &c);
        if let Err(e) = c.client.delete::<Function>(&ns, &name).await {
            api_error(diags, format!("Cannot delete function {name}"), &e);
            return None;
        }
        let timeout = Self::wait_timeout(&prior, &c);
        if let Err(e) = wait::until_gone(&c.client, &ns, &name, timeout).await {
            diags.root_error(format!("Function {name} was not deleted"), chain(&e));
            return None;
        }
        Some(())
    }
}

/// Fills `memory_mb`, `timeout_sec`, `min_instances` and `idle_timeout_sec`
/// with the defaults when the config leaves them out.
fn apply_defaults(planned: &mut FunctionState, config: &FunctionState) {
    fields::default_limits(
        &mut planned.memory_mb,
        &mut planned.timeout_sec,
        &config.memory_mb,
        &config.timeout_sec,
    );
    fields::default_scaling(
        &mut planned.min_instances,
        &mut planned.idle_timeout_sec,
        &config.min_instances,
        &config.idle_timeout_sec,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{
        assert_state_keys_match, code_hash, configured, plan_create, plan_update, schema_of,
        source_dir, v, validate_errors,
    };
    use std::path::Path;
    use tf_provider::AttributePathStep;

    type Mutation = fn(&mut FunctionState);

    fn res() -> FunctionResource {
        FunctionResource::new(Shared::default())
    }

    fn src() -> tempfile::TempDir {
        source_dir("main.py", "def handler(e, c):\n    return 'v1'\n")
    }

    fn config(dir: &Path) -> FunctionState {
        FunctionState {
            name: v("hello"),
            runtime: v("python3.11"),
            entrypoint: v("main.handler"),
            source_dir: v(dir.to_str().unwrap()),
            env_vars: Value::Value(BTreeMap::from([("GREETING".to_string(), v("hi"))])),
            ..Default::default()
        }
    }

    /// What Terraform holds after a successful apply of `config`.
    fn applied(cfg: &FunctionState) -> FunctionState {
        let mut s = cfg.clone();
        s.id = v("sless-2bd806c9/hello");
        s.namespace = v("sless-2bd806c9");
        s.code_hash = code_hash(&cfg.source_dir);
        s.phase = v("Ready");
        s.image_ref = v("local/sless-2bd806c9/hello:0123456789ab");
        s.invoke_url = v("http://127.0.0.1:1/v1/namespaces/sless-2bd806c9/functions/hello/invoke");
        s.last_built_at = v("2026-01-01T00:00:00Z");
        s.memory_mb = Value::Value(128);
        s.timeout_sec = Value::Value(30);
        s.min_instances = Value::Value(0);
        s.idle_timeout_sec = Value::Value(300);
        s
    }

    #[test]
    fn state_keys_match_the_schema() {
        let schema = schema_of(&res());
        assert_state_keys_match::<FunctionState>(&schema);
        for name in COMPUTED_ONLY {
            assert_eq!(
                schema.block.attributes[name].constraint,
                AttributeConstraint::Computed
            );
        }
    }

    #[tokio::test]
    async fn plan_create_hashes_the_folder_and_leaves_outputs_unknown() {
        let d = src();
        let cfg = config(d.path());
        let planned = plan_create(&res(), &cfg).await;
        assert_eq!(planned.code_hash, code_hash(&cfg.source_dir));
        assert_eq!(planned.memory_mb, Value::Value(128));
        assert_eq!(planned.timeout_sec, Value::Value(30));
        assert_eq!(planned.min_instances, Value::Value(0));
        assert_eq!(planned.idle_timeout_sec, Value::Value(300));
        for name in [
            "id",
            "namespace",
            "phase",
            "image_ref",
            "invoke_url",
            "last_built_at",
        ] {
            assert!(planned.computed_only(name).is_unknown(), "{name}");
        }
    }

    #[tokio::test]
    async fn a_configured_provider_plans_the_location() {
        let d = src();
        let cfg = config(d.path());
        // The endpoint's trailing slash is not repeated in the URL.
        let r = FunctionResource::new(configured("http://127.0.0.1:9/", "alice"));
        let planned = plan_create(&r, &cfg).await;
        assert_eq!(planned.id, v("sless-2bd806c9/hello"));
        assert_eq!(planned.namespace, v("sless-2bd806c9"));
        assert_eq!(
            planned.invoke_url,
            v("http://127.0.0.1:9/v1/namespaces/sless-2bd806c9/functions/hello/invoke")
        );
        assert!(planned.phase.is_unknown());
    }

    #[tokio::test]
    async fn unchanged_config_plans_no_change() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let (planned, replace) = plan_update(&res(), &prior, &cfg).await;
        assert_eq!(planned, prior);
        assert!(replace.is_empty());
    }

    #[tokio::test]
    async fn an_env_change_is_in_place_without_rebuild() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut cfg2 = cfg.clone();
        cfg2.env_vars = Value::Value(BTreeMap::from([("GREETING".to_string(), v("bonjour"))]));
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert!(replace.is_empty());
        assert_eq!(planned.code_hash, prior.code_hash);
        assert_eq!(planned.last_built_at, prior.last_built_at);
        assert_eq!(planned.image_ref, prior.image_ref);
        assert_eq!(planned.phase, v("Ready"));
        assert_ne!(planned.env_vars, prior.env_vars);
    }

    #[tokio::test]
    async fn a_scaling_change_is_in_place_and_dropping_it_plans_the_defaults() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut cfg2 = cfg.clone();
        cfg2.min_instances = Value::Value(1);
        cfg2.idle_timeout_sec = Value::Value(60);
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert!(replace.is_empty());
        assert_eq!(planned.phase, v("Ready"));
        assert_eq!(planned.last_built_at, prior.last_built_at);
        assert_eq!(
            (planned.min_instances, planned.idle_timeout_sec),
            (Value::Value(1), Value::Value(60))
        );
        // Removing them from the config goes back to 0 and 300 s.
        let mut scaled = planned.clone();
        scaled.phase = v("Ready");
        let (planned, _) = plan_update(&res(), &scaled, &cfg).await;
        assert_eq!(
            (planned.min_instances, planned.idle_timeout_sec),
            (Value::Value(0), Value::Value(300))
        );
    }

    #[tokio::test]
    async fn a_code_change_shows_on_code_hash_and_rebuilds() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        std::fs::write(
            d.path().join("main.py"),
            "def handler(e, c):\n    return 'v2'\n",
        )
        .unwrap();
        let (planned, replace) = plan_update(&res(), &prior, &cfg).await;
        assert!(replace.is_empty());
        assert!(planned.code_hash.is_value());
        assert_ne!(planned.code_hash, prior.code_hash);
        assert!(planned.last_built_at.is_unknown());
        assert!(planned.phase.is_unknown());
        assert_eq!(planned.id, prior.id);
        assert_eq!(planned.invoke_url, prior.invoke_url);
    }

    #[tokio::test]
    async fn a_name_change_replaces() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut cfg2 = cfg.clone();
        cfg2.name = v("hello2");
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert_eq!(replace, vec![AttributePath::new("name")]);
        assert!(planned.id.is_unknown());
    }

    #[tokio::test]
    async fn a_runtime_change_rebuilds_in_place() {
        let d = src();
        std::fs::write(d.path().join("index.js"), "exports.handler = () => 1;\n").unwrap();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut cfg2 = cfg.clone();
        cfg2.runtime = v("nodejs20");
        cfg2.entrypoint = v("index.handler");
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert!(replace.is_empty());
        assert!(planned.last_built_at.is_unknown());
        assert_eq!(planned.id, prior.id);
    }

    #[tokio::test]
    async fn a_token_for_another_namespace_replaces() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let r = FunctionResource::new(configured("http://127.0.0.1:9", "bob"));
        let (planned, replace) = plan_update(&r, &prior, &cfg).await;
        assert_eq!(replace, vec![AttributePath::new("namespace")]);
        assert_eq!(planned.namespace, v(&sless_wire::namespace_for_sub("bob")));
        assert!(planned.phase.is_unknown());
    }

    #[tokio::test]
    async fn removing_memory_from_config_returns_to_the_default() {
        let d = src();
        let mut cfg = config(d.path());
        cfg.memory_mb = Value::Value(256);
        let prior = applied(&cfg);
        let mut prior = prior;
        prior.memory_mb = Value::Value(256);
        cfg.memory_mb = Value::Null;
        let (planned, _) = plan_update(&res(), &prior, &cfg).await;
        assert_eq!(planned.memory_mb, Value::Value(128));
        assert_eq!(planned.code_hash, prior.code_hash);
    }

    #[tokio::test]
    async fn a_failed_function_is_planned_for_another_try() {
        let d = src();
        let cfg = config(d.path());
        let mut prior = applied(&cfg);
        prior.phase = v("Failed");
        let (planned, _) = plan_update(&res(), &prior, &cfg).await;
        assert!(planned.phase.is_unknown());
    }

    #[tokio::test]
    async fn plan_fails_with_a_path_when_source_dir_is_missing() {
        let d = src();
        let mut cfg = config(d.path());
        cfg.source_dir = v(d.path().join("nope").to_str().unwrap());
        let mut diags = Diagnostics::default();
        assert!(
            res()
                .plan_create(&mut diags, cfg.clone(), cfg, Value::Null)
                .await
                .is_none()
        );
        assert_eq!(diags.errors[0].attribute, AttributePath::new("source_dir"));
    }

    #[tokio::test]
    async fn a_valid_config_validates() {
        let d = src();
        assert!(validate_errors(&res(), config(d.path())).await.is_empty());
        // Unknown values are fine at validate time.
        let mut cfg = config(d.path());
        cfg.source_dir = Value::Unknown;
        cfg.runtime = Value::Unknown;
        assert!(validate_errors(&res(), cfg).await.is_empty());
    }

    #[tokio::test]
    async fn validation_errors_carry_attribute_paths() {
        let d = src();
        let base = config(d.path());
        let cases: Vec<(Mutation, AttributePath)> = vec![
            (
                |c| c.runtime = Value::Value("ruby3.0".into()),
                AttributePath::new("runtime"),
            ),
            (
                |c| c.name = Value::Value("Hello_World".into()),
                AttributePath::new("name"),
            ),
            (
                |c| c.entrypoint = Value::Value("handler".into()),
                AttributePath::new("entrypoint"),
            ),
            (
                |c| c.memory_mb = Value::Value(8),
                AttributePath::new("memory_mb"),
            ),
            (
                |c| c.timeout_sec = Value::Value(901),
                AttributePath::new("timeout_sec"),
            ),
            (
                |c| c.wait_timeout_sec = Value::Value(0),
                AttributePath::new("wait_timeout_sec"),
            ),
            (
                |c| c.min_instances = Value::Value(2),
                AttributePath::new("min_instances"),
            ),
            (
                |c| c.idle_timeout_sec = Value::Value(0),
                AttributePath::new("idle_timeout_sec"),
            ),
            (
                |c| c.source_dir = Value::Value("/definitely/not/here".into()),
                AttributePath::new("source_dir"),
            ),
            (
                |c| c.code_hash = Value::Value("x".into()),
                AttributePath::new("code_hash"),
            ),
            (|c| c.phase = Value::Unknown, AttributePath::new("phase")),
            (
                |c| {
                    c.env_vars = Value::Value(BTreeMap::from([(
                        "1BAD".to_string(),
                        Value::Value("x".to_string()),
                    )]))
                },
                AttributePath::new("env_vars").key("1BAD"),
            ),
        ];
        for (mutate, path) in cases {
            let mut cfg = base.clone();
            mutate(&mut cfg);
            assert_eq!(validate_errors(&res(), cfg).await, vec![path]);
        }
    }

    #[tokio::test]
    async fn null_env_values_are_rejected_with_their_key() {
        let d = src();
        let mut cfg = config(d.path());
        cfg.env_vars = Value::Value(BTreeMap::from([("FOO".to_string(), Value::Null)]));
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("env_vars").key("FOO")]
        );
    }

    #[tokio::test]
    async fn reserved_env_names_are_rejected_with_their_key() {
        let d = src();
        let mut cfg = config(d.path());
        cfg.env_vars = Value::Value(BTreeMap::from([("SLESS_X".to_string(), Value::Unknown)]));
        let errs = validate_errors(&res(), cfg).await;
        assert_eq!(
            errs[0].steps,
            vec![
                AttributePathStep::Attribute("env_vars".into()),
                AttributePathStep::Key("SLESS_X".into())
            ]
        );
    }

    #[tokio::test]
    async fn create_refuses_a_folder_changed_since_plan() {
        let d = src();
        let cfg = config(d.path());
        let r = FunctionResource::new(configured("http://127.0.0.1:9", "alice"));
        let mut diags = Diagnostics::default();
        let (planned, p) = r
            .plan_create(&mut diags, cfg.clone(), cfg.clone(), Value::Null)
            .await
            .unwrap();
        std::fs::write(d.path().join("main.py"), "changed").unwrap();
        assert!(
            r.create(&mut diags, planned, cfg, p, Value::Null)
                .await
                .is_none()
        );
        assert_eq!(diags.errors[0].attribute, AttributePath::new("source_dir"));
        assert!(diags.errors[0].summary.contains("changed after the plan"));
    }
}
