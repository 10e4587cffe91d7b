//! The `sless_job` resource: builds code like a function, runs its
//! entrypoint once with `input` and keeps the return value in `message`
//! (like `aws_lambda_invocation`, with a timeout and failing on errors).
//! Changing input, code, `run_id` or the spec is an in-place update that
//! reruns; apply waits until the run of the newest generation ends.

use crate::code::{self, package, plan_hash};
use crate::fields::{self, Ended, Fetched, attr, env_at_apply, opt};
use crate::provider::{Configured, Shared};
use crate::secrets::{self, SecretFields};
use crate::wait::{Look, poll};
use serde::{Deserialize, Serialize};
use sless_wire::job::validate_input;
use sless_wire::{CreateJob, Job, JobPhase, Runtime, UpdateJob};
use std::sync::Arc;
use std::time::Duration;
use tf_provider::RawValue;
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

/// Default `wait_timeout_sec` of a job (build + run), in seconds.
pub const JOB_WAIT_TIMEOUT_SEC_DEFAULT: u64 = 900;

/// How many output lines a failure diagnostic carries.
pub const JOB_LOG_TAIL_LINES: usize = 30;

/// The phase of a successful run, as stored in state.
const SUCCEEDED: &str = "Succeeded";

/// State of `resource "sless_job"`; field names equal attribute names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// `<namespace>/<name>`.
    #[serde(default)]
    pub id: Value<String>,
    /// Job name.
    #[serde(default)]
    pub name: Value<String>,
    /// Runtime.
    #[serde(default)]
    pub runtime: Value<String>,
    /// `module.function`.
    #[serde(default)]
    pub entrypoint: Value<String>,
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
    /// The event, as JSON text.
    #[serde(default)]
    pub input: Value<String>,
    /// Bump to run again.
    #[serde(default)]
    pub run_id: Value<i64>,
    /// How long apply waits (build + run), in seconds.
    #[serde(default)]
    pub wait_timeout_sec: Value<i64>,
    /// Memory limit in MiB.
    #[serde(default)]
    pub memory_mb: Value<i64>,
    /// Run timeout in seconds.
    #[serde(default)]
    pub timeout_sec: Value<i64>,
    /// Namespace.
    #[serde(default)]
    pub namespace: Value<String>,
    /// Phase of the last run.
    #[serde(default)]
    pub phase: Value<String>,
    /// The return value, JSON-encoded.
    #[serde(default)]
    pub message: Value<String>,
    /// RFC 3339 start of the last run.
    #[serde(default)]
    pub started_at: Value<String>,
    /// RFC 3339 end of the last run.
    #[serde(default)]
    pub completed_at: Value<String>,
    /// sha256 of the normalised content of `source_dir`.
    #[serde(default)]
    pub code_hash: Value<String>,
    /// Image reference of the last build.
    #[serde(default)]
    pub image_ref: Value<String>,
}

/// Attributes only the provider sets.
const COMPUTED_ONLY: [&str; 9] = [
    "id",
    "secret_env_vars_hash",
    "namespace",
    "phase",
    "message",
    "started_at",
    "completed_at",
    "code_hash",
    "image_ref",
];

fn phase_str(p: JobPhase) -> &'static str {
    match p {
        JobPhase::Pending => "Pending",
        JobPhase::Building => "Building",
        JobPhase::Running => "Running",
        JobPhase::Succeeded => SUCCEEDED,
        JobPhase::Failed => "Failed",
    }
}

impl JobState {
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
            "phase" => &self.phase,
            "message" => &self.message,
            "started_at" => &self.started_at,
            "completed_at" => &self.completed_at,
            "code_hash" => &self.code_hash,
            _ => &self.image_ref,
        }
    }

    /// Marks the outputs of a run as unknown (planned for a rerun).
    fn unknown_run_outputs(&mut self) {
        self.phase = Value::Unknown;
        self.message = Value::Unknown;
        self.started_at = Value::Unknown;
        self.completed_at = Value::Unknown;
    }

    /// Copies the operator's view into the computed attributes.
    fn fill_from(mut self, j: &Job) -> Self {
        self.id = Value::Value(format!("{}/{}", j.namespace, j.name));
        self.secret_env_vars_hash =
            secrets::hash_for_state(self.secret_fields(), &j.spec.secret_env_vars);
        self.namespace = Value::Value(j.namespace.clone());
        self.memory_mb = Value::Value(i64::from(j.spec.memory_mb));
        self.timeout_sec = Value::Value(i64::from(j.spec.timeout_sec));
        self
    }

    /// True when the planned run builds the code again (new code or runtime),
    /// or when no build is known yet: `image_ref` will change.
    fn rebuilds(&self, prior: &JobState) -> bool {
        self.code_hash != prior.code_hash
            || self.runtime != prior.runtime
            || prior.image_ref.is_null()
    }

    /// Copies the outcome of a finished run.
    fn fill_run(mut self, j: &Job) -> Self {
        self.phase = Value::Value(phase_str(j.status.phase).to_string());
        self.message = opt(&j.status.message);
        self.started_at = opt(&j.status.started_at);
        self.completed_at = opt(&j.status.completed_at);
        self.image_ref = opt(&j.status.image_ref);
        self
    }

    /// Turns every unknown into null (a state returned with an error).
    fn resolve_unknowns(mut self) -> Self {
        fields::unknowns_to_null([
            &mut self.id,
            &mut self.secret_env_vars_hash,
            &mut self.namespace,
            &mut self.phase,
            &mut self.message,
            &mut self.started_at,
            &mut self.completed_at,
            &mut self.image_ref,
        ]);
        fields::unknowns_to_null([&mut self.memory_mb, &mut self.timeout_sec]);
        self
    }

    /// True when the spec the operator runs differs (anything that reruns).
    fn run_spec_differs(&self, prior: &JobState) -> bool {
        self.code_hash != prior.code_hash
            || self.runtime != prior.runtime
            || self.entrypoint != prior.entrypoint
            || self.env_vars != prior.env_vars
            || self.secret_env_vars_hash != prior.secret_env_vars_hash
            || self.secret_env_vars_version != prior.secret_env_vars_version
            || self.input != prior.input
            || self.run_id != prior.run_id
            || self.memory_mb != prior.memory_mb
            || self.timeout_sec != prior.timeout_sec
    }
}

/// True when a finished run of the newest generation is seen.
fn settled(j: &Job) -> bool {
    j.status.observed_generation >= j.generation && j.status.phase.is_terminal()
}

/// The tail of the run output of a failed job, else of its build log.
async fn failure_output(c: &Configured, ns: &str, name: &str) -> String {
    let mut errors = Vec::new();
    for kind in ["run", "build"] {
        match c
            .client
            .log::<Job>(ns, name, kind, JOB_LOG_TAIL_LINES)
            .await
        {
            Ok(l) if !l.trim().is_empty() => return format!("{kind} log:\n{}", l.trim_end()),
            Ok(_) => {}
            Err(e) => errors.push(format!("(could not fetch the {kind} log: {e})")),
        }
    }
    if errors.is_empty() {
        "(the output is empty)".to_string()
    } else {
        errors.join("\n")
    }
}

/// True when the operator's error already ends with the log's last line
/// (it carries the output tail), so the log would only repeat it.
fn repeats_log(error: &str, log: &str) -> bool {
    log.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .is_some_and(|last| error.contains(last))
}

/// The `sless_job` resource.
#[derive(Debug, Clone)]
pub struct JobResource {
    shared: Shared,
}

impl JobResource {
    /// A resource reading the provider's configuration from `shared`.
    pub fn new(shared: Shared) -> Self {
        JobResource { shared }
    }

    fn wait_timeout(state: &JobState) -> Duration {
        fields::wait_timeout(
            &state.wait_timeout_sec,
            Duration::from_secs(JOB_WAIT_TIMEOUT_SEC_DEFAULT),
        )
    }

    /// Waits until the run of generation `generation` (or a newer one) ends.
    /// A failed run becomes a diagnostic with the error and the output tail.
    /// Returns the last job seen and whether the run succeeded.
    async fn wait_run(
        diags: &mut Diagnostics,
        c: &Configured,
        ns: &str,
        name: &str,
        generation: u64,
        timeout: Duration,
    ) -> (Option<Job>, bool) {
        let look = || async move {
            let j = c.client.get::<Job>(ns, name).await?;
            Ok(j.map(|j| {
                if j.status.observed_generation >= generation && j.status.phase.is_terminal() {
                    if j.status.phase == JobPhase::Succeeded {
                        Look::Done(j)
                    } else {
                        let why = j.status.error.clone().unwrap_or_default();
                        Look::Failed(j, why)
                    }
                } else {
                    let seen = format!(
                        "phase {} (run {} of {})",
                        phase_str(j.status.phase),
                        j.status.observed_generation,
                        j.generation
                    );
                    Look::Waiting(j, seen)
                }
            }))
        };
        match fields::ended(diags, "job", name, "finished", poll(timeout, look).await) {
            Ended::Done(j) => (Some(j), true),
            Ended::Failed(j, why) => {
                let why = if why.is_empty() {
                    "no error message".to_string()
                } else {
                    why
                };
                let log = failure_output(c, ns, name).await;
                let mut detail = format!(
                    "Job {name} (runtime {}, entrypoint {}) failed: {why}",
                    j.spec.runtime, j.spec.entrypoint
                );
                if !repeats_log(&why, &log) {
                    detail.push_str(&format!(
                        "\n\nLast {JOB_LOG_TAIL_LINES} lines of its {}",
                        log.trim_end()
                    ));
                }
                diags.root_error(format!("Job {name} failed"), detail);
                (Some(j), false)
            }
            Ended::Reported(last) => (last, false),
        }
    }

    /// Waits for the run and merges the result into `state`.
    async fn finish(
        diags: &mut Diagnostics,
        c: &Configured,
        mut state: JobState,
        generation: u64,
    ) -> JobState {
        let ns = fields::namespace_of(&state.namespace, c);
        let name = state.name.as_ref_option().cloned().unwrap_or_default();
        let timeout = Self::wait_timeout(&state);
        let (last, ok) = Self::wait_run(diags, c, &ns, &name, generation, timeout).await;
        if let Some(j) = &last {
            state = state.fill_from(j);
            if settled(j) {
                state = state.fill_run(j);
            }
        }
        if ok { state } else { state.resolve_unknowns() }
    }
}

/// Fills `memory_mb` and `timeout_sec` with the defaults when the config
/// leaves them out.
fn apply_defaults(planned: &mut JobState, config: &JobState) {
    fields::default_limits(
        &mut planned.memory_mb,
        &mut planned.timeout_sec,
        &config.memory_mb,
        &config.timeout_sec,
    );
}

#[async_trait::async_trait]
impl Resource for JobResource {
    type State<'a> = JobState;
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
                    "reruns the job, without a rebuild",
                    tf_provider::map! {
                        "name" => attr(String, Required, "Job name: a DNS-1123 label. Changing it replaces the job."),
                        "runtime" => attr(String, Required, &format!("Language runtime, one of: {runtimes}. Changing it rebuilds and reruns.")),
                        "entrypoint" => attr(String, Required, "`module.function` called once with `input` as the event. Changing it reruns."),
                        "source_dir" => attr(String, Required, "Folder with the job's code, e.g. `\"${path.module}/src\"`. Built like a function's; a content change reruns."),
                        "env_vars" => attr(Map(Box::new(String)), Optional, "Environment variables of the run. Changing them reruns."),
                        "secret_env_vars" => fields::sensitive_attr(Map(Box::new(String)), Optional, "Secret environment variables of the run (sensitive: never shown in plans). Stored apart by the operator, never returned (only their names and `secret_env_vars_hash`). Names follow the `env_vars` rules and cannot also be in `env_vars`. Changing them reruns, without a rebuild."),
                        "secret_env_vars_hash" => attr(String, Computed, "The operator's fingerprint of `secret_env_vars` (sha256 over the names and values): a value changed outside Terraform shows here as drift and plans an in-place update. Null without secrets."),
                        "input" => attr(String, Optional, "The event as JSON text, e.g. `jsonencode({numbers = [1, 2]})` (default `null`). Compared as JSON: reformatting is not a change. Changing it reruns."),
                        "run_id" => attr(Number, Optional, "Any number; change it to run the job again (an in-place update)."),
                        "wait_timeout_sec" => attr(Number, Optional, "How long create and update wait for the build and the run, in seconds (default 900)."),
                        "memory_mb" => attr(Number, OptionalComputed, "Memory limit in MiB, 64-4096 (default 128). Changing it reruns."),
                        "timeout_sec" => attr(Number, OptionalComputed, "Run timeout in seconds, 1-900 (default 30): a longer run is killed and fails. Changing it reruns."),
                        "id" => attr(String, Computed, "`<namespace>/<name>`."),
                        "namespace" => attr(String, Computed, "The namespace the job lives in."),
                        "phase" => attr(String, Computed, "Phase of the last run: Succeeded after a successful apply (Pending, Building, Running, Failed otherwise)."),
                        "message" => attr(String, Computed, "The entrypoint's return value, JSON-encoded: use `jsondecode(...)`. Not sensitive (so it can feed other resources and outputs): do not return secrets."),
                        "started_at" => attr(String, Computed, "RFC 3339 start of the last run."),
                        "completed_at" => attr(String, Computed, "RFC 3339 end of the last run."),
                        "code_hash" => attr(String, Computed, "sha256 of the normalised content of `source_dir`, computed at plan time."),
                        "image_ref" => attr(String, Computed, "Reference of the image the last run was built into, where the backend has one (the local backend: `local/<namespace>/<name>:<first 12 hex of the zip's sha256>`). Changes only when the code or the runtime does.")
                    },
                ),
                description: Description::markdown(
                    "Runs code once with an input and keeps its return value in state.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        fields::check_computed_only(diags, &COMPUTED_ONLY, |n| {
            !config.computed_only(n).is_null()
        });
        fields::check_name(diags, "job", &config.name);
        fields::check_entrypoint(diags, &config.runtime, &config.entrypoint);
        fields::check_limits(
            diags,
            config.memory_mb,
            config.timeout_sec,
            config.wait_timeout_sec,
        );
        fields::check_env_vars(diags, &config.env_vars);
        fields::check_secret_env_vars(diags, &config.secret_env_vars, &config.env_vars);
        secrets::check_config(diags, config.secret_fields(), &config.env_vars);
        fields::check_source_dir(diags, &config.source_dir);
        if let Value::Value(i) = &config.input
            && let Err(e) = validate_input("input", i)
        {
            crate::diag::field_error(diags, "Invalid input", &e);
        }
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let j = match fields::fetch::<Job>(diags, &self.shared, &state.namespace, &state.name).await
        {
            Fetched::Found(_, j) => j,
            Fetched::Gone => return None,
            Fetched::Keep => return Some((state, private)),
        };
        let mut s = state;
        s.runtime = Value::Value(j.spec.runtime.as_str().to_string());
        s.entrypoint = Value::Value(j.spec.entrypoint.clone());
        s.env_vars = fields::env_from_api(&j.spec.env_vars, &s.env_vars);
        s.input = if s.input.is_null() && j.spec.input.trim() == "null" {
            Value::Null
        } else {
            fields::same_json_or(&s.input, &j.spec.input)
        };
        if !(s.run_id.is_null() && j.spec.run_id == 0) {
            s.run_id = Value::Value(j.spec.run_id);
        }
        if let Some(h) = &j.status.source_hash {
            s.code_hash = Value::Value(h.clone());
        }
        s = s.fill_from(&j);
        // Only a finished run of the newest generation says what the job gave.
        if settled(&j) {
            s = s.fill_run(&j);
        }
        Some((s, private))
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
        planned.unknown_run_outputs();
        planned.image_ref = Value::Unknown;
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
            planned.unknown_run_outputs();
            planned.image_ref = Value::Unknown;
        } else if planned.run_spec_differs(&prior)
            || prior.phase.as_ref_option().map(String::as_str) != Some(SUCCEEDED)
        {
            // Something the run depends on changed, or the last run did not
            // succeed: run again (and build again when the code changed).
            planned.unknown_run_outputs();
            if planned.rebuilds(&prior) {
                planned.image_ref = Value::Unknown;
            }
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
        let body = CreateJob {
            name: Some(name.clone()),
            runtime: planned.runtime.as_ref_option().cloned(),
            entrypoint: planned.entrypoint.as_ref_option().cloned(),
            env_vars: env,
            secret_env_vars: secrets::at_create(
                diags,
                planned.secret_fields(),
                config.secret_fields(),
            )?,
            input: planned.input.as_ref_option().cloned(),
            run_id: planned.run_id.as_ref_option().copied(),
            memory_mb: planned.memory_mb.as_ref_option().copied(),
            timeout_sec: planned.timeout_sec.as_ref_option().copied(),
        };
        let created = match fields::create::<Job>(diags, &c, &name, &body).await {
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
        // From here on the job exists: always return a state.
        let Some(uploaded) = code::upload::<Job>(diags, &c, &c.namespace, &name, pkg).await else {
            return Some((state.resolve_unknowns(), private));
        };
        let state = Self::finish(diags, &c, state, uploaded.generation).await;
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
        let patch = UpdateJob {
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
            input: (planned.input != prior.input).then(|| {
                let input = planned.input.as_ref_option().cloned();
                input.unwrap_or_else(|| "null".to_string())
            }),
            run_id: (planned.run_id != prior.run_id)
                .then(|| planned.run_id.as_ref_option().copied().unwrap_or(0)),
            memory_mb: fields::changed(&planned.memory_mb, &prior.memory_mb),
            timeout_sec: fields::changed(&planned.timeout_sec, &prior.timeout_sec),
        };
        let rerun = planned.phase.is_unknown();
        // New code, or a rerun that no spec change causes (the last run
        // failed): an upload starts a new generation.
        let upload =
            planned.code_hash != prior.code_hash || (rerun && patch == UpdateJob::default());
        let pkg = if upload {
            Some(package(diags, &planned.source_dir, &planned.code_hash)?)
        } else {
            None
        };
        let mut state = planned;
        state.namespace = Value::Value(ns.clone());
        let mut generation = None;
        if patch != UpdateJob::default() {
            let j = fields::update::<Job>(diags, &c, &ns, &name, &patch).await?;
            generation = Some(j.generation);
            state = state.fill_from(&j);
        }
        if let Some(p) = pkg {
            let Some(j) = code::upload::<Job>(diags, &c, &ns, &name, p).await else {
                let mut s = state.resolve_unknowns();
                s.code_hash = prior.code_hash.clone();
                return Some((s, private));
            };
            generation = Some(j.generation);
        }
        let state = match generation {
            Some(g) if rerun => Self::finish(diags, &c, state, g).await,
            _ => state,
        };
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
            "sless_job",
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
        let name = fields::import_name(diags, &c, "sless_job", &id)?;
        let state = JobState {
            name: Value::Value(name.clone()),
            namespace: Value::Value(c.namespace.clone()),
            ..Default::default()
        };
        match self.read(diags, state, Value::Null, Value::Null).await {
            Some(imported) if diags.errors.is_empty() => Some(imported),
            Some(_) => None,
            None => {
                fields::import_missing(diags, "job", &name, &c.namespace);
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
        let timeout = Self::wait_timeout(&prior);
        fields::delete_and_wait::<Job>(diags, &c, &prior.namespace, &prior.name, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{
        assert_state_keys_match, code_hash, plan_create, plan_in_place, schema_of, source_dir, v,
        validate_errors,
    };
    use std::path::Path;

    fn res() -> JobResource {
        JobResource::new(Shared::default())
    }

    fn src() -> tempfile::TempDir {
        source_dir(
            "main.py",
            "def handler(e, c):\n    return sum(e['numbers'])\n",
        )
    }

    fn config(dir: &Path) -> JobState {
        JobState {
            name: v("sum"),
            runtime: v("python3.11"),
            entrypoint: v("main.handler"),
            source_dir: v(dir.to_str().unwrap()),
            input: v(r#"{"numbers":[100,200,300]}"#),
            run_id: Value::Value(1),
            ..Default::default()
        }
    }

    fn applied(cfg: &JobState) -> JobState {
        let mut s = cfg.clone();
        s.id = v("sless-2bd806c9/sum");
        s.namespace = v("sless-2bd806c9");
        s.code_hash = code_hash(&cfg.source_dir);
        s.phase = v("Succeeded");
        s.message = v("600");
        s.started_at = v("2026-01-01T00:00:00Z");
        s.completed_at = v("2026-01-01T00:00:01Z");
        s.memory_mb = Value::Value(128);
        s.timeout_sec = Value::Value(30);
        s.image_ref = v("local/sless-2bd806c9/sum:0123456789ab");
        s
    }

    #[test]
    fn state_keys_match_the_schema() {
        let schema = schema_of(&res());
        assert_state_keys_match::<JobState>(&schema);
        assert!(!schema.block.attributes["message"].sensitive);
    }

    #[tokio::test]
    async fn unchanged_config_plans_no_change() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        assert_eq!(plan_in_place(&res(), &prior, &cfg).await, prior);
    }

    #[tokio::test]
    async fn run_id_input_code_and_env_changes_rerun_in_place() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut bumped = cfg.clone();
        bumped.run_id = Value::Value(2);
        let mut other_input = cfg.clone();
        other_input.input = v(r#"{"numbers":[1]}"#);
        let mut env = cfg.clone();
        env.env_vars = Value::Value([("A".to_string(), v("1"))].into());
        for c in [bumped, other_input, env] {
            let planned = plan_in_place(&res(), &prior, &c).await;
            assert!(planned.message.is_unknown());
            assert!(planned.phase.is_unknown());
            assert_eq!(planned.code_hash, prior.code_hash);
            // A rerun of the same code reuses its build.
            assert_eq!(planned.image_ref, prior.image_ref);
        }
        std::fs::write(
            d.path().join("main.py"),
            "def handler(e, c):\n    return 0\n",
        )
        .unwrap();
        let planned = plan_in_place(&res(), &prior, &cfg).await;
        assert_ne!(planned.code_hash, prior.code_hash);
        assert!(planned.message.is_unknown());
        assert!(planned.image_ref.is_unknown());
    }

    #[tokio::test]
    async fn a_wait_timeout_change_does_not_rerun() {
        let d = src();
        let cfg = config(d.path());
        let prior = applied(&cfg);
        let mut c = cfg.clone();
        c.wait_timeout_sec = Value::Value(60);
        let planned = plan_in_place(&res(), &prior, &c).await;
        assert_eq!(planned.message, prior.message);
        assert_eq!(planned.phase, prior.phase);
    }

    #[tokio::test]
    async fn a_failed_run_is_planned_again() {
        let d = src();
        let cfg = config(d.path());
        let mut prior = applied(&cfg);
        prior.phase = v("Failed");
        prior.message = Value::Null;
        let planned = plan_in_place(&res(), &prior, &cfg).await;
        assert!(planned.phase.is_unknown());
    }

    #[tokio::test]
    async fn bad_input_and_limits_fail_validation_with_paths() {
        let d = src();
        let mut cfg = config(d.path());
        cfg.input = v("{not json");
        cfg.timeout_sec = Value::Value(0);
        cfg.message = v("x");
        let mut paths = validate_errors(&res(), cfg).await;
        paths.sort_by_key(|p| format!("{p:?}"));
        let mut want = vec![
            AttributePath::new("input"),
            AttributePath::new("timeout_sec"),
            AttributePath::new("message"),
        ];
        want.sort_by_key(|p| format!("{p:?}"));
        assert_eq!(paths, want);
    }

    #[test]
    fn a_log_already_in_the_error_is_not_repeated() {
        let log = "run log:\n=== run 2\nTraceback\nValueError: boom\n";
        assert!(repeats_log(
            "raised ValueError: boom\nTraceback\nValueError: boom",
            log
        ));
        assert!(!repeats_log(
            "timed out after 2 s",
            "run log:\nsless: killed\n"
        ));
        assert!(!repeats_log("x", ""));
    }

    #[tokio::test]
    async fn plan_create_leaves_the_run_outputs_unknown() {
        let d = src();
        let cfg = config(d.path());
        let p = plan_create(&res(), &cfg).await;
        assert!(p.message.is_unknown() && p.completed_at.is_unknown());
        assert!(p.image_ref.is_unknown());
        assert!(p.code_hash.is_value());
        assert_eq!(p.timeout_sec, Value::Value(30));
    }
}
