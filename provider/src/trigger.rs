//! The `sless_trigger` resource: an http trigger (a public URL for a
//! function) or a cron trigger (calls it on a schedule). Create and update
//! wait until the trigger is Active (or Disabled); destroy waits until it is
//! gone. `next_run_at` and `last_run_at` are refreshed by read only, so the
//! server moving them on never shows as a diff.

use crate::fields::{self, Ended, Fetched, attr, opt};
use crate::provider::{Configured, Shared};
use crate::wait::{Look, poll};
use serde::{Deserialize, Serialize};
use sless_wire::trigger::validate_payload;
use sless_wire::{CreateTrigger, Trigger, TriggerPhase, UpdateTrigger, validate};
use std::sync::Arc;
use tf_provider::RawValue;
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

/// State of `resource "sless_trigger"`; field names equal attribute names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriggerState {
    /// `<namespace>/<name>`.
    #[serde(default)]
    pub id: Value<String>,
    /// Trigger name.
    #[serde(default)]
    pub name: Value<String>,
    /// Target function name.
    #[serde(default)]
    pub function: Value<String>,
    /// `http` or `cron`.
    #[serde(default, rename = "type")]
    pub trigger_type: Value<String>,
    /// Cron schedule.
    #[serde(default)]
    pub schedule: Value<String>,
    /// JSON text sent to cron invocations.
    #[serde(default)]
    pub payload: Value<String>,
    /// Whether the trigger fires / serves.
    #[serde(default)]
    pub enabled: Value<bool>,
    /// How long create, update and delete wait, in seconds.
    #[serde(default)]
    pub wait_timeout_sec: Value<i64>,
    /// Namespace.
    #[serde(default)]
    pub namespace: Value<String>,
    /// Public URL (http).
    #[serde(default)]
    pub url: Value<String>,
    /// Active, Waiting or Disabled.
    #[serde(default)]
    pub phase: Value<String>,
    /// Next scheduled run (cron).
    #[serde(default)]
    pub next_run_at: Value<String>,
    /// End of the last run (cron).
    #[serde(default)]
    pub last_run_at: Value<String>,
}

/// Attributes only the provider sets.
const COMPUTED_ONLY: [&str; 6] = [
    "id",
    "namespace",
    "url",
    "phase",
    "next_run_at",
    "last_run_at",
];

/// The phase name as stored in state.
pub(crate) fn phase_str(p: TriggerPhase) -> &'static str {
    match p {
        TriggerPhase::Active => "Active",
        TriggerPhase::Waiting => "Waiting",
        TriggerPhase::Disabled => "Disabled",
    }
}

impl TriggerState {
    fn computed_only(&self, name: &str) -> &Value<String> {
        match name {
            "id" => &self.id,
            "namespace" => &self.namespace,
            "url" => &self.url,
            "phase" => &self.phase,
            "next_run_at" => &self.next_run_at,
            _ => &self.last_run_at,
        }
    }

    #[cfg(test)]
    fn is_http(&self) -> bool {
        self.trigger_type.as_ref_option().map(String::as_str) == Some("http")
    }

    /// Marks what the operator moves on as unknown (planned for an apply).
    fn unknown_status(&mut self) {
        self.phase = Value::Unknown;
        self.next_run_at = Value::Unknown;
        self.last_run_at = Value::Unknown;
    }

    /// Copies what the operator reports into the computed attributes. A known
    /// `url` is kept (it is stable for the life of the trigger).
    fn fill_from(mut self, t: &Trigger) -> Self {
        self.id = Value::Value(format!("{}/{}", t.namespace, t.name));
        self.namespace = Value::Value(t.namespace.clone());
        self.phase = Value::Value(phase_str(t.status.phase).to_string());
        self.next_run_at = opt(&t.status.next_run_at);
        self.last_run_at = opt(&t.status.last_run.as_ref().map(|r| r.completed_at.clone()));
        if !self.url.is_value() {
            self.url = opt(&t.status.url);
        }
        self.enabled = Value::Value(t.spec.enabled);
        self
    }

    /// Turns every unknown into null (a state returned with an error).
    fn resolve_unknowns(mut self) -> Self {
        fields::unknowns_to_null([
            &mut self.id,
            &mut self.namespace,
            &mut self.url,
            &mut self.phase,
            &mut self.next_run_at,
            &mut self.last_run_at,
        ]);
        self
    }
}

/// The `sless_trigger` resource.
#[derive(Debug, Clone)]
pub struct TriggerResource {
    shared: Shared,
}

impl TriggerResource {
    /// A resource reading the provider's configuration from `shared`.
    pub fn new(shared: Shared) -> Self {
        TriggerResource { shared }
    }

    /// Plans a new trigger: location, unknown status, url unknown (http) or
    /// null (cron).
    fn plan_new(&self, planned: &mut TriggerState) {
        let c = self.shared.try_get();
        (planned.id, planned.namespace) = fields::plan_location(c.as_deref(), &planned.name);
        planned.unknown_status();
        planned.url = match &planned.trigger_type {
            Value::Value(t) if t == "cron" => Value::Null,
            _ => Value::Unknown,
        };
    }

    /// Waits until the trigger is Active (Disabled when disabled) and, for
    /// http, its URL is known, and merges the trigger last seen into `state`
    /// (which has no unknowns left when the wait fails).
    async fn wait_settled(
        diags: &mut Diagnostics,
        c: &Configured,
        mut state: TriggerState,
        ns: &str,
        name: &str,
        enabled: bool,
    ) -> TriggerState {
        let look = || async move {
            let t = c.client.get::<Trigger>(ns, name).await?;
            Ok(t.map(|t| {
                let want = if enabled {
                    TriggerPhase::Active
                } else {
                    TriggerPhase::Disabled
                };
                let url_ok =
                    t.spec.trigger_type != sless_wire::TriggerType::Http || t.status.url.is_some();
                let seen = match &t.status.message {
                    Some(m) if !m.is_empty() => {
                        format!("phase {} ({m})", phase_str(t.status.phase))
                    }
                    _ => format!("phase {}", phase_str(t.status.phase)),
                };
                if t.status.phase == want && url_ok {
                    Look::Done(t)
                } else {
                    Look::Waiting(t, seen)
                }
            }))
        };
        let target = if enabled { "Active" } else { "Disabled" };
        let timeout = fields::wait_timeout(&state.wait_timeout_sec, c.wait_timeout);
        let (last, ok) =
            match fields::ended(diags, "trigger", name, target, poll(timeout, look).await) {
                Ended::Done(t) => (Some(t), true),
                Ended::Failed(t, why) => {
                    diags.root_error(format!("Trigger {name} failed"), why);
                    (Some(t), false)
                }
                Ended::Reported(last) => (last, false),
            };
        if let Some(t) = &last {
            state = state.fill_from(t);
        }
        if ok { state } else { state.resolve_unknowns() }
    }
}

/// True when `a` and `b` differ at most in what only the provider uses
/// (`wait_timeout_sec`): nothing to send, nothing to wait for.
fn same_on_the_operator(a: &TriggerState, b: &TriggerState) -> bool {
    let mut a = a.clone();
    a.wait_timeout_sec = b.wait_timeout_sec;
    a == *b
}

/// Checks type, schedule and payload together.
fn check_kind(diags: &mut Diagnostics, config: &TriggerState) {
    let kind = match &config.trigger_type {
        Value::Value(t) if t == "http" || t == "cron" => Some(t.as_str()),
        Value::Value(t) => {
            diags.error(
                "Invalid type",
                format!("unknown trigger type {t:?}: supported types are http, cron"),
                AttributePath::new("type"),
            );
            None
        }
        _ => None,
    };
    if let Value::Value(s) = &config.schedule
        && let Err(e) = validate::cron_schedule("schedule", s)
    {
        crate::diag::field_error(diags, "Invalid schedule", &e);
    }
    if let Value::Value(p) = &config.payload
        && let Err(e) = validate_payload("payload", p)
    {
        crate::diag::field_error(diags, "Invalid payload", &e);
    }
    match kind {
        Some("cron") if config.schedule.is_null() => diags.error(
            "Missing schedule",
            "a cron trigger needs a schedule, e.g. \"*/5 * * * *\"",
            AttributePath::new("schedule"),
        ),
        Some("http") if !config.schedule.is_null() => diags.error(
            "Unexpected schedule",
            "only cron triggers have a schedule",
            AttributePath::new("schedule"),
        ),
        Some("http") if !config.payload.is_null() => diags.error(
            "Unexpected payload",
            "only cron triggers have a payload; http triggers pass the request body",
            AttributePath::new("payload"),
        ),
        _ => {}
    }
}

#[async_trait::async_trait]
impl Resource for TriggerResource {
    type State<'a> = TriggerState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::{Computed, Optional, OptionalComputed, Required};
        use AttributeType::{Bool, Number, String};
        Some(Schema {
            version: crate::state_upgrade::SCHEMA_VERSION,
            block: Block {
                version: 1,
                attributes: tf_provider::map! {
                    "name" => attr(String, Required, "Trigger name: a DNS-1123 label. Changing it replaces the trigger."),
                    "function" => attr(String, Required, "Name of the function (in the same namespace) the trigger calls. Changing it is an in-place update."),
                    "type" => attr(String, Required, "`http` (a public URL) or `cron` (calls on a schedule). Changing it replaces the trigger."),
                    "schedule" => attr(String, Optional, "Cron schedule (cron only, required there): five fields, or six with leading seconds. Checked at plan time."),
                    "payload" => attr(String, Optional, "JSON text sent as the body of each cron invocation (cron only), e.g. `jsonencode({...})`."),
                    "enabled" => attr(Bool, OptionalComputed, "Whether the trigger serves (http) or fires (cron). Default `true`. A disabled http trigger answers 404."),
                    "wait_timeout_sec" => attr(Number, Optional, "How long create, update and delete wait for the trigger, in seconds. Defaults to the provider's `wait_timeout_sec` (600). Changing it alone changes nothing on the operator."),
                    "id" => attr(String, Computed, "`<namespace>/<name>`."),
                    "namespace" => attr(String, Computed, "The namespace the trigger lives in."),
                    "url" => attr(String, Computed, "The public URL of an http trigger (no token needed); null for cron triggers. Stable for the life of the trigger."),
                    "phase" => attr(String, Computed, "Active, Waiting (its function is not Ready or does not exist) or Disabled."),
                    "next_run_at" => attr(String, Computed, "RFC 3339 time of the next scheduled run (cron). Refreshed on every read; never causes a diff."),
                    "last_run_at" => attr(String, Computed, "RFC 3339 end of the last finished run (cron). Refreshed on every read; never causes a diff.")
                },
                description: Description::markdown(
                    "Calls a function: a public http URL or a cron schedule.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        fields::check_computed_only(diags, &COMPUTED_ONLY, |n| {
            !config.computed_only(n).is_null()
        });
        fields::check_name(diags, "trigger", &config.name);
        fields::check_timeout(diags, "wait_timeout_sec", &config.wait_timeout_sec);
        if let Value::Value(f) = &config.function
            && let Err(e) = validate::name("function", f)
        {
            crate::diag::field_error(diags, "Invalid function name", &e);
        }
        check_kind(diags, &config);
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
            fields::fetch::<Trigger>(diags, &self.shared, &state.namespace, &state.name).await;
        let t = match fetched {
            Fetched::Found(_, t) => t,
            Fetched::Gone => return None,
            Fetched::Keep => return Some((state, private)),
        };
        let mut s = state;
        s.function = Value::Value(t.spec.function.clone());
        s.trigger_type = Value::Value(t.spec.trigger_type.as_str().to_string());
        s.schedule = opt(&t.spec.schedule);
        s.payload = match &t.spec.payload {
            Some(p) => fields::same_json_or(&s.payload, p),
            None => Value::Null,
        };
        if t.status.url.is_some() {
            s.url = opt(&t.status.url);
        }
        Some((s.fill_from(&t), private))
    }

    async fn plan_create<'a>(
        &self,
        _diags: &mut Diagnostics,
        proposed: Self::State<'a>,
        _config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let mut planned = proposed;
        if planned.enabled.is_null() {
            planned.enabled = Value::Value(true);
        }
        self.plan_new(&mut planned);
        Some((planned, Value::Null))
    }

    async fn plan_update<'a>(
        &self,
        _diags: &mut Diagnostics,
        prior: Self::State<'a>,
        proposed: Self::State<'a>,
        config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let mut planned = proposed;
        if config.enabled.is_null() {
            planned.enabled = Value::Value(true);
        }
        let mut replace = Vec::new();
        if planned.name != prior.name {
            replace.push(AttributePath::new("name"));
        }
        if planned.trigger_type != prior.trigger_type {
            replace.push(AttributePath::new("type"));
        }
        let c = self.shared.try_get();
        if let Some(ns) = fields::other_namespace(c.as_deref(), &prior.namespace) {
            planned.namespace = Value::Value(ns);
            replace.push(AttributePath::new("namespace"));
        }
        if !replace.is_empty() {
            self.plan_new(&mut planned);
        } else if !same_on_the_operator(&planned, &prior) {
            planned.unknown_status();
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
        _config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let c: Arc<Configured> = self.shared.get(diags)?;
        let name = planned.name.as_ref_option().cloned().unwrap_or_default();
        let enabled = planned.enabled.as_ref_option().copied().unwrap_or(true);
        let body = CreateTrigger {
            name: Some(name.clone()),
            function: planned.function.as_ref_option().cloned(),
            trigger_type: planned.trigger_type.as_ref_option().cloned(),
            schedule: planned.schedule.as_ref_option().cloned(),
            payload: planned.payload.as_ref_option().cloned(),
            enabled: Some(enabled),
        };
        let created = match fields::create::<Trigger>(diags, &c, &name, &body).await {
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
        let state = Self::wait_settled(diags, &c, state, &c.namespace, &name, enabled).await;
        Some((state, private))
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        planned: Self::State<'a>,
        _config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let c: Arc<Configured> = self.shared.get(diags)?;
        let name = planned.name.as_ref_option().cloned().unwrap_or_default();
        let ns = fields::namespace_of(&prior.namespace, &c);
        let enabled = planned.enabled.as_ref_option().copied().unwrap_or(true);
        let patch = UpdateTrigger {
            function: fields::changed(&planned.function, &prior.function),
            schedule: fields::changed(&planned.schedule, &prior.schedule),
            // An empty string clears the payload.
            payload: (planned.payload != prior.payload)
                .then(|| planned.payload.as_ref_option().cloned().unwrap_or_default()),
            enabled: (planned.enabled != prior.enabled).then_some(enabled),
        };
        let mut state = planned;
        state.url = prior.url.clone();
        if patch == UpdateTrigger::default() {
            // Only `wait_timeout_sec` changed: nothing to tell the operator,
            // and the planned status is the prior one.
            return Some((state, private));
        }
        let t = fields::update::<Trigger>(diags, &c, &ns, &name, &patch).await?;
        state = state.fill_from(&t);
        let state = Self::wait_settled(diags, &c, state, &ns, &name, enabled).await;
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
            "sless_trigger",
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
        // the operator (all but `wait_timeout_sec`).
        let c = self.shared.get(diags)?;
        let name = fields::import_name(diags, &c, "sless_trigger", &id)?;
        let state = TriggerState {
            name: Value::Value(name.clone()),
            namespace: Value::Value(c.namespace.clone()),
            ..Default::default()
        };
        match self.read(diags, state, Value::Null, Value::Null).await {
            Some(imported) if diags.errors.is_empty() => Some(imported),
            Some(_) => None,
            None => {
                fields::import_missing(diags, "trigger", &name, &c.namespace);
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
        let timeout = fields::wait_timeout(&prior.wait_timeout_sec, c.wait_timeout);
        fields::delete_and_wait::<Trigger>(diags, &c, &prior.namespace, &prior.name, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{
        assert_state_keys_match, configured, plan_create, plan_update, schema_of, v,
        validate_errors,
    };

    fn res() -> TriggerResource {
        TriggerResource::new(configured("http://127.0.0.1:9", "alice"))
    }

    fn cron() -> TriggerState {
        TriggerState {
            name: v("tick"),
            function: v("hello"),
            trigger_type: v("cron"),
            schedule: v("*/2 * * * * *"),
            payload: v(r#"{"n":1}"#),
            ..Default::default()
        }
    }

    fn http() -> TriggerState {
        TriggerState {
            name: v("web"),
            function: v("hello"),
            trigger_type: v("http"),
            ..Default::default()
        }
    }

    fn applied(cfg: &TriggerState) -> TriggerState {
        let mut s = cfg.clone();
        s.enabled = Value::Value(true);
        s.id = v("sless-2bd806c9/x");
        s.namespace = v("sless-2bd806c9");
        s.phase = v("Active");
        if cfg.is_http() {
            s.url = v("http://127.0.0.1:9/t/sless-2bd806c9/web");
        } else {
            s.url = Value::Null;
            s.next_run_at = v("2026-01-01T00:00:02Z");
            s.last_run_at = v("2026-01-01T00:00:00Z");
        }
        s
    }

    #[test]
    fn state_keys_match_the_schema() {
        assert_state_keys_match::<TriggerState>(&schema_of(&res()));
    }

    #[tokio::test]
    async fn an_invalid_schedule_fails_validation_at_schedule() {
        let mut cfg = cron();
        cfg.schedule = v("every minute");
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("schedule")]
        );
        let mut cfg = cron();
        cfg.schedule = Value::Null;
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("schedule")]
        );
        let mut cfg = http();
        cfg.schedule = v("* * * * *");
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("schedule")]
        );
        let mut cfg = cron();
        cfg.payload = v("{nope");
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("payload")]
        );
        let mut cfg = http();
        cfg.trigger_type = v("queue");
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("type")]
        );
        let mut cfg = http();
        cfg.wait_timeout_sec = Value::Value(0);
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("wait_timeout_sec")]
        );
        let mut cfg = http();
        cfg.url = v("x");
        assert_eq!(
            validate_errors(&res(), cfg).await,
            vec![AttributePath::new("url")]
        );
        assert!(validate_errors(&res(), cron()).await.is_empty());
        assert!(validate_errors(&res(), http()).await.is_empty());
    }

    #[tokio::test]
    async fn plan_create_leaves_the_url_unknown_for_http_and_null_for_cron() {
        let p = plan_create(&res(), &http()).await;
        assert!(p.url.is_unknown());
        assert_eq!(p.enabled, Value::Value(true));
        assert_eq!(p.id, v("sless-2bd806c9/web"));
        let p = plan_create(&res(), &cron()).await;
        assert!(p.url.is_null());
        assert!(p.next_run_at.is_unknown());
    }

    #[tokio::test]
    async fn refreshed_run_times_plan_no_change() {
        for cfg in [cron(), http()] {
            let mut prior = applied(&cfg);
            // The server moved on since the last apply; read refreshed these.
            prior.next_run_at = v("2026-01-01T00:10:00Z");
            prior.last_run_at = v("2026-01-01T00:09:58Z");
            let (planned, replace) = plan_update(&res(), &prior, &cfg).await;
            assert_eq!(planned, prior);
            assert!(replace.is_empty());
        }
    }

    #[tokio::test]
    async fn a_schedule_change_is_in_place_and_keeps_the_url() {
        let cfg = cron();
        let prior = applied(&cfg);
        let mut cfg2 = cfg.clone();
        cfg2.schedule = v("*/5 * * * * *");
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert!(replace.is_empty());
        assert!(planned.next_run_at.is_unknown());
        let cfg = http();
        let prior = applied(&cfg);
        let mut cfg2 = cfg.clone();
        cfg2.enabled = Value::Value(false);
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert!(replace.is_empty());
        assert_eq!(planned.url, prior.url);
        assert!(planned.phase.is_unknown());
    }

    #[tokio::test]
    async fn a_wait_timeout_change_alone_keeps_the_status() {
        for cfg in [cron(), http()] {
            let prior = applied(&cfg);
            let mut cfg2 = cfg.clone();
            cfg2.wait_timeout_sec = Value::Value(30);
            let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
            assert!(replace.is_empty());
            assert_eq!(planned.wait_timeout_sec, Value::Value(30));
            assert_eq!(planned.phase, prior.phase);
            assert_eq!(planned.next_run_at, prior.next_run_at);
            // Nothing to send: update returns the plan without asking the
            // operator (the test provider's endpoint answers nothing).
            let mut diags = Diagnostics::default();
            let (state, _) = res()
                .update(
                    &mut diags,
                    prior,
                    planned.clone(),
                    cfg2,
                    Value::Null,
                    Value::Null,
                )
                .await
                .unwrap();
            assert!(diags.errors.is_empty(), "{:?}", diags.errors);
            assert_eq!(state, planned);
        }
    }

    #[tokio::test]
    async fn a_type_change_replaces() {
        let cfg = http();
        let prior = applied(&cfg);
        let mut cfg2 = cron();
        cfg2.name = cfg.name.clone();
        let (planned, replace) = plan_update(&res(), &prior, &cfg2).await;
        assert_eq!(replace, vec![AttributePath::new("type")]);
        assert!(planned.url.is_null());
    }
}
