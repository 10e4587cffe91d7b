//! The `sless_service` resource: a long-running process the user writes
//! (it listens on `$PORT`), served on a public URL and restarted when it
//! dies. Memory, env, command and timeout changes apply in place without a
//! rebuild; new code or a new runtime rebuilds.

use crate::code::{self, package, plan_hash};
use crate::diag::field_error;
use crate::fields::{self, Ended, Fetched, attr, env_at_apply, opt};
use crate::provider::{Configured, Shared};
use crate::secrets::{self, SecretFields};
use crate::wait::{Readiness, poll, ready_look};
use serde::{Deserialize, Serialize};
use sless_wire::service::{validate_health_path, validate_script};
use sless_wire::{CreateService, Runtime, Service, UpdateService};
use std::sync::Arc;
use std::time::Duration;
use tf_provider::RawValue;
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

/// How many build-log lines a failure diagnostic carries.
pub const SERVICE_LOG_TAIL_LINES: usize = 30;

/// Default readiness path.
const HEALTH_PATH_DEFAULT: &str = "/";

/// The phase of a healthy service, as stored in state.
const READY: &str = "Ready";

/// A command line as Terraform sends it.
pub type CommandList = Value<Vec<Value<String>>>;

/// State of `resource "sless_service"`; field names equal attribute names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceState {
    /// `<namespace>/<name>`.
    #[serde(default)]
    pub id: Value<String>,
    /// Service name.
    #[serde(default)]
    pub name: Value<String>,
    /// Runtime.
    #[serde(default)]
    pub runtime: Value<String>,
    /// Script relative to the code root.
    #[serde(default)]
    pub entrypoint: Value<String>,
    /// Full command line instead of `entrypoint`.
    #[serde(default)]
    pub command: CommandList,
    /// Folder with the code.
    #[serde(default)]
    pub source_dir: Value<String>,
    /// Environment variables.
    #[serde(default)]
    pub env_vars: fields::EnvMap,
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
    /// Per-request timeout in seconds.
    #[serde(default)]
    pub timeout_sec: Value<i64>,
    /// Readiness path.
    #[serde(default)]
    pub health_path: Value<String>,
    /// How long apply waits, in seconds.
    #[serde(default)]
    pub wait_timeout_sec: Value<i64>,
    /// Namespace.
    #[serde(default)]
    pub namespace: Value<String>,
    /// Public URL.
    #[serde(default)]
    pub url: Value<String>,
    /// Lifecycle phase.
    #[serde(default)]
    pub phase: Value<String>,
    /// sha256 of the normalised content of `source_dir`.
    #[serde(default)]
    pub code_hash: Value<String>,
    /// End of the last successful build.
    #[serde(default)]
    pub last_built_at: Value<String>,
}

/// Attributes only the provider sets.
const COMPUTED_ONLY: [&str; 7] = [
    "id",
    "secret_env_vars_hash",
    "namespace",
    "url",
    "phase",
    "code_hash",
    "last_built_at",
];

impl ServiceState {
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
            "url" => &self.url,
            "phase" => &self.phase,
            "code_hash" => &self.code_hash,
            _ => &self.last_built_at,
        }
    }

    /// Marks what a build changes as unknown.
    fn unknown_build_outputs(&mut self) {
        self.phase = Value::Unknown;
        self.last_built_at = Value::Unknown;
    }

    /// The command as strings (`None` when null, unknown or partly unknown).
    fn command_vec(&self) -> Option<Vec<String>> {
        match &self.command {
            Value::Value(v) => v.iter().map(|a| a.as_ref_option().cloned()).collect(),
            _ => None,
        }
    }

    /// Copies what the operator reports into the computed attributes. A known
    /// `url` is kept (it is stable for the life of the service).
    fn fill_from(mut self, s: &Service) -> Self {
        self.id = Value::Value(format!("{}/{}", s.namespace, s.name));
        self.secret_env_vars_hash =
            secrets::hash_for_state(self.secret_fields(), &s.spec.secret_env_vars);
        self.namespace = Value::Value(s.namespace.clone());
        self.phase = Value::Value(s.status.phase.as_str().to_string());
        self.last_built_at = opt(&s.status.last_built_at);
        if !self.url.is_value() {
            self.url = opt(&s.status.url);
        }
        self.memory_mb = Value::Value(i64::from(s.spec.memory_mb));
        self.timeout_sec = Value::Value(i64::from(s.spec.timeout_sec));
        self.health_path = Value::Value(s.spec.health_path.clone());
        self
    }

    /// Turns every unknown into null (a state returned with an error).
    fn resolve_unknowns(mut self) -> Self {
        fields::unknowns_to_null([
            &mut self.id,
            &mut self.secret_env_vars_hash,
            &mut self.namespace,
            &mut self.url,
            &mut self.phase,
            &mut self.last_built_at,
            &mut self.health_path,
        ]);
        fields::unknowns_to_null([&mut self.memory_mb, &mut self.timeout_sec]);
        self
    }
}

/// The `sless_service` resource.
#[derive(Debug, Clone)]
pub struct ServiceResource {
    shared: Shared,
}

impl ServiceResource {
    /// A resource reading the provider's configuration from `shared`.
    pub fn new(shared: Shared) -> Self {
        ServiceResource { shared }
    }

    fn wait_timeout(state: &ServiceState, c: &Configured) -> Duration {
        fields::wait_timeout(&state.wait_timeout_sec, c.wait_timeout)
    }

    /// Waits until the service is Ready (running `code_sha256` when given);
    /// a failure becomes a diagnostic with the message and the build log.
    async fn wait_ready(
        diags: &mut Diagnostics,
        c: &Configured,
        state: ServiceState,
        code_sha256: Option<&str>,
    ) -> ServiceState {
        let ns = fields::namespace_of(&state.namespace, c);
        let name = state.name.as_ref_option().cloned().unwrap_or_default();
        let (ns_ref, name_ref) = (ns.as_str(), name.as_str());
        let look = || async move {
            let s = c.client.get::<Service>(ns_ref, name_ref).await?;
            Ok(s.map(|s| {
                ready_look(s, code_sha256, |s| Readiness {
                    phase: s.status.phase,
                    message: s.status.message.as_deref(),
                    code_sha256: s.status.code_sha256.as_deref(),
                })
            }))
        };
        let r = poll(Self::wait_timeout(&state, c), look).await;
        let (last, ok) = match fields::ended(diags, "service", &name, READY, r) {
            Ended::Done(s) => (Some(s), true),
            Ended::Failed(s, why) => {
                let log = code::build_log::<Service>(c, &ns, &name, SERVICE_LOG_TAIL_LINES).await;
                diags.root_error(
                    format!("Service {name} failed: phase Failed"),
                    format!(
                        "Service {name} (runtime {}) is in phase Failed: {}\n\nLast {SERVICE_LOG_TAIL_LINES} lines of the build log:\n{}",
                        s.spec.runtime,
                        if why.is_empty() { "no message" } else { why.as_str() },
                        log.trim_end()
                    ),
                );
                (Some(s), false)
            }
            Ended::Reported(last) => (last, false),
        };
        let mut state = state;
        if let Some(s) = &last {
            state = state.fill_from(s);
        }
        if ok { state } else { state.resolve_unknowns() }
    }
}

/// Fills the defaults of Optional+Computed attributes left out of the config.
fn apply_defaults(planned: &mut ServiceState, config: &ServiceState) {
    fields::default_limits(
        &mut planned.memory_mb,
        &mut planned.timeout_sec,
        &config.memory_mb,
        &config.timeout_sec,
    );
    if config.health_path.is_null() {
        planned.health_path = Value::Value(HEALTH_PATH_DEFAULT.to_string());
    }
}

/// Checks that exactly one of `entrypoint` and `command` is given, and each.
fn check_start(diags: &mut Diagnostics, config: &ServiceState) {
    if let Value::Value(e) = &config.entrypoint
        && let Err(err) = validate_script("entrypoint", e)
    {
        field_error(diags, "Invalid entrypoint", &err);
    }
    if let Value::Value(cmd) = &config.command {
        match cmd.first() {
            None | Some(Value::Null) => diags.error(
                "Invalid command",
                "the command needs a program as its first element",
                AttributePath::new("command"),
            ),
            Some(Value::Value(p)) if p.trim().is_empty() => diags.error(
                "Invalid command",
                "the command needs a program as its first element",
                AttributePath::new("command"),
            ),
            _ => {}
        }
    }
    match (&config.entrypoint, &config.command) {
        (Value::Null, Value::Null) => diags.error(
            "Missing entrypoint",
            "give entrypoint (a script such as app.py) or command (e.g. [\"python3\", \"-m\", \"app\"])",
            AttributePath::new("entrypoint"),
        ),
        (Value::Value(_), Value::Value(_)) => diags.error(
            "Conflicting command",
            "give either entrypoint or command, not both",
            AttributePath::new("command"),
        ),
        _ => {}
    }
}

#[async_trait::async_trait]
impl Resource for ServiceResource {
    type State<'a> = ServiceState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::{Computed, Optional, OptionalComputed, Required};
        use AttributeType::{List, Map, Number, String};
        let runtimes = Runtime::list();
        Some(Schema {
            version: crate::state_upgrade::SCHEMA_VERSION,
            block: Block {
                version: 1,
                attributes: secrets::with_schema_attributes(
                    "restarts the service without a rebuild",
                    tf_provider::map! {
                        "name" => attr(String, Required, "Service name: a DNS-1123 label. Changing it replaces the service."),
                        "runtime" => attr(String, Required, &format!("Language runtime, one of: {runtimes}. Changing it rebuilds in place.")),
                        "entrypoint" => attr(String, Optional, "The script to run, relative to the code root (e.g. `app.py`, `server.js`). Give this or `command`. Changing it restarts without a rebuild."),
                        "command" => attr(List(Box::new(String)), Optional, "A full command line instead of `entrypoint`, e.g. `[\"python3\", \"-m\", \"app\"]`. Changing it restarts without a rebuild."),
                        "source_dir" => attr(String, Required, "Folder with the service's code, e.g. `\"${path.module}/src\"`. A content change rebuilds."),
                        "env_vars" => attr(Map(Box::new(String)), Optional, "Environment variables (`PORT` is set by the platform). Changing them restarts without a rebuild."),
                        "secret_env_vars" => fields::sensitive_attr(Map(Box::new(String)), Optional, "Secret environment variables (sensitive: never shown in plans). Stored apart by the operator, never returned (only their names and `secret_env_vars_hash`). Names follow the `env_vars` rules and cannot also be in `env_vars`. Changing them restarts the service without a rebuild."),
                        "secret_env_vars_hash" => attr(String, Computed, "The operator's fingerprint of `secret_env_vars` (sha256 over the names and values): a value changed outside Terraform shows here as drift and plans an in-place update. Null without secrets."),
                        "memory_mb" => attr(Number, OptionalComputed, "Memory limit in MiB, 64-4096 (default 128). Changing it restarts without a rebuild."),
                        "timeout_sec" => attr(Number, OptionalComputed, "Per-request timeout at the proxy in seconds, 1-900 (default 30)."),
                        "health_path" => attr(String, OptionalComputed, "Readiness path polled until it answers below 500 (default `/`)."),
                        "wait_timeout_sec" => attr(Number, Optional, "How long create, update and delete wait, in seconds. Defaults to the provider's `wait_timeout_sec` (600)."),
                        "id" => attr(String, Computed, "`<namespace>/<name>`."),
                        "namespace" => attr(String, Computed, "The namespace the service lives in."),
                        "url" => attr(String, Computed, "The public URL of the service (no token needed). Stable for the life of the service."),
                        "phase" => attr(String, Computed, "Lifecycle phase: Pending, Building, Ready, Failed or Deleting."),
                        "code_hash" => attr(String, Computed, "sha256 of the normalised content of `source_dir`, computed at plan time."),
                        "last_built_at" => attr(String, Computed, "RFC 3339 time the last successful build finished (unchanged by in-place updates).")
                    },
                ),
                description: Description::markdown(
                    "A long-running process you write, served on a public URL and restarted when it dies.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        fields::check_computed_only(diags, &COMPUTED_ONLY, |n| {
            !config.computed_only(n).is_null()
        });
        fields::check_name(diags, "service", &config.name);
        fields::check_runtime(diags, &config.runtime);
        check_start(diags, &config);
        fields::check_limits(
            diags,
            config.memory_mb,
            config.timeout_sec,
            config.wait_timeout_sec,
        );
        if let Value::Value(h) = &config.health_path
            && let Err(e) = validate_health_path("health_path", h)
        {
            field_error(diags, "Invalid health_path", &e);
        }
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
            fields::fetch::<Service>(diags, &self.shared, &state.namespace, &state.name).await;
        let svc = match fetched {
            Fetched::Found(_, s) => s,
            Fetched::Gone => return None,
            Fetched::Keep => return Some((state, private)),
        };
        let mut s = state;
        s.runtime = Value::Value(svc.spec.runtime.as_str().to_string());
        s.entrypoint = opt(&svc.spec.entrypoint);
        s.command = if svc.spec.command.is_empty() {
            Value::Null
        } else {
            Value::Value(
                svc.spec
                    .command
                    .iter()
                    .map(|a| Value::Value(a.clone()))
                    .collect(),
            )
        };
        s.env_vars = fields::env_from_api(&svc.spec.env_vars, &s.env_vars);
        if let Some(h) = &svc.status.source_hash {
            s.code_hash = Value::Value(h.clone());
        }
        if svc.status.url.is_some() {
            s.url = opt(&svc.status.url);
        }
        Some((s.fill_from(&svc), private))
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
        let c = self.shared.try_get();
        (planned.id, planned.namespace) = fields::plan_location(c.as_deref(), &planned.name);
        planned.url = Value::Unknown;
        planned.unknown_build_outputs();
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
        let c = self.shared.try_get();
        if let Some(ns) = fields::other_namespace(c.as_deref(), &prior.namespace) {
            planned.namespace = Value::Value(ns);
            replace.push(AttributePath::new("namespace"));
        }
        if !replace.is_empty() {
            (planned.id, planned.namespace) = fields::plan_location(c.as_deref(), &planned.name);
            planned.url = Value::Unknown;
            planned.unknown_build_outputs();
        } else if planned.code_hash != prior.code_hash
            || planned.runtime != prior.runtime
            || prior.phase.as_ref_option().map(String::as_str) != Some(READY)
        {
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
        let body = CreateService {
            name: Some(name.clone()),
            runtime: planned.runtime.as_ref_option().cloned(),
            entrypoint: planned.entrypoint.as_ref_option().cloned(),
            command: planned.command_vec(),
            env_vars: env,
            secret_env_vars: secrets::at_create(
                diags,
                planned.secret_fields(),
                config.secret_fields(),
            )?,
            memory_mb: planned.memory_mb.as_ref_option().copied(),
            timeout_sec: planned.timeout_sec.as_ref_option().copied(),
            health_path: planned.health_path.as_ref_option().cloned(),
        };
        let created = match fields::create::<Service>(diags, &c, &name, &body).await {
            Ok(created) => created,
            Err(fields::NotCreated::Refused) => return None,
            Err(fields::NotCreated::AnswerLost) => {
                // Tracked as tainted: the next apply replaces what was stored.
                let mut state = planned;
                (state.id, state.namespace) = fields::plan_location(Some(&c), &state.name);
                return Some((state.resolve_unknowns(), private));
            }
        };
        let state = planned.fill_from(&created);
        let sha256 = pkg.sha256.clone();
        if code::upload::<Service>(diags, &c, &c.namespace, &name, pkg)
            .await
            .is_none()
        {
            return Some((state.resolve_unknowns(), private));
        }
        let state = Self::wait_ready(diags, &c, state, Some(&sha256)).await;
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
        let start = planned.entrypoint != prior.entrypoint || planned.command != prior.command;
        let patch = UpdateService {
            runtime: fields::changed(&planned.runtime, &prior.runtime),
            entrypoint: if start {
                planned.entrypoint.as_ref_option().cloned()
            } else {
                None
            },
            // An empty list clears the command.
            command: start.then(|| planned.command_vec().unwrap_or_default()),
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
            health_path: fields::changed(&planned.health_path, &prior.health_path),
        };
        let upload = planned.code_hash != prior.code_hash
            || prior.phase.as_ref_option().map(String::as_str) != Some(READY);
        let pkg = if upload {
            Some(package(diags, &planned.source_dir, &planned.code_hash)?)
        } else {
            None
        };
        let mut state = planned;
        state.namespace = Value::Value(ns.clone());
        state.url = prior.url.clone();
        if patch != UpdateService::default() {
            let s = fields::update::<Service>(diags, &c, &ns, &name, &patch).await?;
            state = state.fill_from(&s);
        }
        let mut sha = None;
        if let Some(p) = pkg {
            let zip_sha = p.sha256.clone();
            if code::upload::<Service>(diags, &c, &ns, &name, p)
                .await
                .is_none()
            {
                let mut s = state.resolve_unknowns();
                s.code_hash = prior.code_hash.clone();
                return Some((s, private));
            }
            sha = Some(zip_sha);
        }
        let state = Self::wait_ready(diags, &c, state, sha.as_deref()).await;
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
            "sless_service",
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
        let name = fields::import_name(diags, &c, "sless_service", &id)?;
        let state = ServiceState {
            name: Value::Value(name.clone()),
            namespace: Value::Value(c.namespace.clone()),
            ..Default::default()
        };
        match self.read(diags, state, Value::Null, Value::Null).await {
            Some(imported) if diags.errors.is_empty() => Some(imported),
            Some(_) => None,
            None => {
                fields::import_missing(diags, "service", &name, &c.namespace);
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
        let timeout = Self::wait_timeout(&prior, &c);
        fields::delete_and_wait::<Service>(diags, &c, &prior.namespace, &prior.name, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{
        assert_state_keys_match, code_hash, plan_in_place, schema_of, source_dir, v,
        validate_errors,
    };
    use std::path::Path;

    fn res() -> ServiceResource {
        ServiceResource::new(Shared::default())
    }

    fn src() -> tempfile::TempDir {
        source_dir("app.py", "print('serving')\n")
    }

    fn config(dir: &Path) -> ServiceState {
        ServiceState {
            name: v("web"),
            runtime: v("python3.11"),
            entrypoint: v("app.py"),
            source_dir: v(dir.to_str().unwrap()),
            env_vars: Value::Value([("GREETING".to_string(), v("hi"))].into()),
            ..Default::default()
        }
    }

    fn applied(cfg: &ServiceState) -> ServiceState {
        let mut s = cfg.clone();
        s.id = v("sless-2bd806c9/web");
        s.namespace = v("sless-2bd806c9");
        s.url = v("http://127.0.0.1:9/s/sless-2bd806c9/web");
        s.phase = v("Ready");
        s.code_hash = code_hash(&cfg.source_dir);
        s.last_built_at = v("2026-01-01T00:00:00Z");
        s.memory_mb = Value::Value(128);
        s.timeout_sec = Value::Value(30);
        s.health_path = v("/");
        s
    }

    #[test]
    fn state_keys_match_the_schema() {
        assert_state_keys_match::<ServiceState>(&schema_of(&res()));
    }

    #[tokio::test]
    async fn unchanged_config_plans_no_change() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        assert_eq!(plan_in_place(&res(), &prior, &cfg).await, prior);
    }

    #[tokio::test]
    async fn memory_and_env_changes_are_in_place_without_rebuild() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut c = cfg.clone();
        c.memory_mb = Value::Value(256);
        c.env_vars = Value::Value([("GREETING".to_string(), v("bonjour"))].into());
        let planned = plan_in_place(&res(), &prior, &c).await;
        assert_eq!(planned.last_built_at, prior.last_built_at);
        assert_eq!(planned.phase, prior.phase);
        assert_eq!(planned.url, prior.url);
        assert_eq!(planned.memory_mb, Value::Value(256));
    }

    #[tokio::test]
    async fn a_code_change_rebuilds() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        std::fs::write(d.path().join("app.py"), "print('v2')\n").unwrap();
        let planned = plan_in_place(&res(), &prior, &cfg).await;
        assert!(planned.last_built_at.is_unknown());
        assert_ne!(planned.code_hash, prior.code_hash);
        assert_eq!(planned.url, prior.url);
    }

    #[tokio::test]
    async fn entrypoint_and_command_are_checked() {
        let d = src();
        let mut c = config(d.path());
        c.entrypoint = v("../app.py");
        assert_eq!(
            validate_errors(&res(), c).await,
            vec![AttributePath::new("entrypoint")]
        );
        let mut c = config(d.path());
        c.command = Value::Value(vec![v("python3"), v("app.py")]);
        assert_eq!(
            validate_errors(&res(), c).await,
            vec![AttributePath::new("command")]
        );
        let mut c = config(d.path());
        c.entrypoint = Value::Null;
        assert_eq!(
            validate_errors(&res(), c).await,
            vec![AttributePath::new("entrypoint")]
        );
        let mut c = config(d.path());
        c.entrypoint = Value::Null;
        c.command = Value::Value(vec![v("python3"), v("app.py")]);
        assert!(validate_errors(&res(), c).await.is_empty());
        let mut c = config(d.path());
        c.health_path = v("healthz");
        assert_eq!(
            validate_errors(&res(), c).await,
            vec![AttributePath::new("health_path")]
        );
        assert!(validate_errors(&res(), config(d.path())).await.is_empty());
    }
}
