//! Attribute helpers shared by the resources: schema attributes, the checks
//! every resource runs at validate time (names, env vars, limits, source
//! folders, computed-only attributes), turning API errors into pathed
//! diagnostics, and the create/read/update/delete calls every resource makes.

use crate::client::{ClientError, Kind, chain};
use crate::diag::{field_error, field_path};
use crate::provider::{Configured, Shared, TIMEOUT_SEC_LIMIT};
use crate::source::check_dir;
use crate::wait::{Look, Outcome, poll};
use sless_wire::limits::{
    IDLE_TIMEOUT_SEC_DEFAULT, MEMORY_MB_DEFAULT, MIN_INSTANCES_DEFAULT, TIMEOUT_SEC_DEFAULT,
};
use sless_wire::{ErrorCode, Runtime, validate};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tf_provider::schema::{Attribute, AttributeConstraint, AttributeType, Description};
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

/// A Terraform map of strings as it arrives in state and config.
pub type EnvMap = Value<BTreeMap<String, Value<String>>>;

/// A sensitive attribute (Terraform never shows its value) with a markdown
/// description.
pub fn sensitive_attr(t: AttributeType, c: AttributeConstraint, doc: &str) -> Attribute {
    Attribute {
        sensitive: true,
        ..attr(t, c, doc)
    }
}

/// The planned `secret_env_vars_hash`: the operator's fingerprint of the
/// configured values (null without secrets, unknown while a value is).
pub fn plan_secret_hash(secrets: &EnvMap) -> Value<String> {
    match known_env(secrets) {
        None => Value::Unknown,
        Some(m) if m.is_empty() => Value::Null,
        Some(m) => Value::Value(sless_wire::secret_hash(&m)),
    }
}

/// The operator's `secret_env_vars_hash` (null without secrets).
pub fn secret_hash_from_api(s: &sless_wire::SecretEnv) -> Value<String> {
    if s.is_empty() {
        Value::Null
    } else {
        Value::Value(s.hash.clone())
    }
}

/// The secrets to send at apply time (an empty map removes them).
pub fn secrets_at_apply(diags: &mut Diagnostics, v: &EnvMap) -> Option<sless_wire::SecretValues> {
    let m = known_env(v);
    if m.is_none() {
        diags.error_short(
            "secret_env_vars are not known at apply time",
            AttributePath::new("secret_env_vars"),
        );
    }
    m.map(sless_wire::SecretValues)
}

/// Checks `secret_env_vars` with the operator's rules: no null values, the
/// `env_vars` name rules and sizes, no name also in `env_vars`. Messages
/// never carry a value.
pub fn check_secret_env_vars(diags: &mut Diagnostics, secrets: &EnvMap, env: &EnvMap) {
    let Value::Value(m) = secrets else {
        return;
    };
    for (k, val) in m {
        if val.is_null() {
            diags.error(
                "Invalid secret_env_vars",
                format!("{k} is null: give it a value or remove it"),
                AttributePath::new("secret_env_vars").key(k.clone()),
            );
        }
    }
    let known: BTreeMap<String, String> = m
        .iter()
        .map(|(k, v)| (k.clone(), v.as_ref_option().cloned().unwrap_or_default()))
        .collect();
    let plain: BTreeMap<String, String> = match env {
        Value::Value(e) => e.keys().map(|k| (k.clone(), String::new())).collect(),
        _ => BTreeMap::new(),
    };
    if let Err(e) = sless_wire::secret::validate_secrets(&known, &plain) {
        field_error(diags, "Invalid secret_env_vars", &e);
    }
}

/// A non-sensitive attribute with a markdown description.
pub fn attr(t: AttributeType, c: AttributeConstraint, doc: &str) -> Attribute {
    Attribute {
        attr_type: t,
        description: Description::markdown(doc),
        constraint: c,
        sensitive: false,
        deprecated: false,
        write_only: false,
    }
}

/// Adds a diagnostic for an API error, pointing at the field it names.
pub fn api_error(diags: &mut Diagnostics, summary: String, e: &ClientError) {
    match e.api_error().and_then(|a| a.field.clone()) {
        Some(field) => diags.error(summary, e.to_string(), field_path(&field)),
        None => diags.root_error(summary, chain(e)),
    }
}

/// The env map when every key and value is known (null → empty).
pub fn known_env(v: &EnvMap) -> Option<BTreeMap<String, String>> {
    match v {
        Value::Null => Some(BTreeMap::new()),
        Value::Unknown => None,
        Value::Value(m) => m
            .iter()
            .map(|(k, v)| match v {
                Value::Value(s) => Some((k.clone(), s.clone())),
                Value::Null => Some((k.clone(), String::new())),
                Value::Unknown => None,
            })
            .collect(),
    }
}

/// Like [`known_env`], adding an error when a value is still unknown at apply time.
pub fn env_at_apply(diags: &mut Diagnostics, v: &EnvMap) -> Option<BTreeMap<String, String>> {
    let env = known_env(v);
    if env.is_none() {
        diags.error_short(
            "env_vars are not known at apply time",
            AttributePath::new("env_vars"),
        );
    }
    env
}

/// The env map the operator reports, as state: an empty map stays null when
/// the state had none (so a config without `env_vars` shows no diff).
pub fn env_from_api(api: &BTreeMap<String, String>, state: &EnvMap) -> EnvMap {
    if api.is_empty() && state.is_null() {
        Value::Null
    } else {
        Value::Value(
            api.iter()
                .map(|(k, v)| (k.clone(), Value::Value(v.clone())))
                .collect(),
        )
    }
}

/// Errors for the computed-only attributes `names` that `is_set` says the
/// configuration sets.
pub fn check_computed_only(diags: &mut Diagnostics, names: &[&str], is_set: impl Fn(&str) -> bool) {
    for name in names {
        if is_set(name) {
            diags.error(
                format!("{name} cannot be set"),
                format!("{name} is computed by the provider; remove it from the configuration."),
                AttributePath::new(name.to_string()),
            );
        }
    }
}

/// Checks a resource name (DNS-1123 label).
pub fn check_name(diags: &mut Diagnostics, kind: &str, name: &Value<String>) {
    if let Value::Value(n) = name
        && let Err(e) = validate::name("name", n)
    {
        field_error(diags, &format!("Invalid {kind} name"), &e);
    }
}

/// Checks the runtime; returns it when known and supported.
pub fn check_runtime(diags: &mut Diagnostics, runtime: &Value<String>) -> Option<Runtime> {
    match runtime {
        Value::Value(r) => match validate::runtime("runtime", r) {
            Ok(r) => Some(r),
            Err(e) => {
                field_error(diags, "Unsupported runtime", &e);
                None
            }
        },
        _ => None,
    }
}

/// Checks a `module.function` entrypoint against the runtime.
pub fn check_entrypoint(diags: &mut Diagnostics, runtime: &Value<String>, ep: &Value<String>) {
    if let (Some(rt), Value::Value(ep)) = (check_runtime(diags, runtime), ep)
        && let Err(e) = validate::entrypoint("entrypoint", rt, ep)
    {
        field_error(diags, "Invalid entrypoint", &e);
    }
}

/// Checks `memory_mb`, `timeout_sec` and `wait_timeout_sec`.
pub fn check_limits(
    diags: &mut Diagnostics,
    memory: Value<i64>,
    timeout: Value<i64>,
    wait: Value<i64>,
) {
    if let Value::Value(m) = memory
        && let Err(e) = validate::memory_mb("memory_mb", m)
    {
        field_error(diags, "Invalid memory_mb", &e);
    }
    if let Value::Value(t) = timeout
        && let Err(e) = validate::timeout_sec("timeout_sec", t)
    {
        field_error(diags, "Invalid timeout_sec", &e);
    }
    check_timeout(diags, "wait_timeout_sec", &wait);
}

/// Checks `min_instances` and `idle_timeout_sec` with the operator's rules.
pub fn check_scaling(diags: &mut Diagnostics, min_instances: Value<i64>, idle: Value<i64>) {
    if let Value::Value(m) = min_instances
        && let Err(e) = validate::min_instances("min_instances", m)
    {
        field_error(diags, "Invalid min_instances", &e);
    }
    if let Value::Value(t) = idle
        && let Err(e) = validate::idle_timeout_sec("idle_timeout_sec", t)
    {
        field_error(diags, "Invalid idle_timeout_sec", &e);
    }
}

/// Plans the defaults of `min_instances` and `idle_timeout_sec` where the
/// config leaves them out.
pub fn default_scaling(
    min_instances: &mut Value<i64>,
    idle: &mut Value<i64>,
    config_min_instances: &Value<i64>,
    config_idle: &Value<i64>,
) {
    if config_min_instances.is_null() {
        *min_instances = Value::Value(i64::from(MIN_INSTANCES_DEFAULT));
    }
    if config_idle.is_null() {
        *idle = Value::Value(i64::from(IDLE_TIMEOUT_SEC_DEFAULT));
    }
}

/// Checks a timeout in seconds the provider itself applies (1 s to a day).
pub fn check_timeout(diags: &mut Diagnostics, name: &'static str, v: &Value<i64>) {
    if let Value::Value(n) = v
        && !(1..=TIMEOUT_SEC_LIMIT).contains(n)
    {
        diags.error(
            format!("Invalid {name}"),
            format!("{n} is out of range: must be between 1 and {TIMEOUT_SEC_LIMIT} seconds"),
            AttributePath::new(name),
        );
    }
}

/// Plans the defaults of `memory_mb` and `timeout_sec` where the config
/// leaves them out (Optional+Computed values are otherwise sticky).
pub fn default_limits(
    memory: &mut Value<i64>,
    timeout: &mut Value<i64>,
    config_memory: &Value<i64>,
    config_timeout: &Value<i64>,
) {
    if config_memory.is_null() {
        *memory = Value::Value(i64::from(MEMORY_MB_DEFAULT));
    }
    if config_timeout.is_null() {
        *timeout = Value::Value(i64::from(TIMEOUT_SEC_DEFAULT));
    }
}

/// Turns every unknown value into null (a state returned with an error must
/// be fully known).
pub fn unknowns_to_null<'a, T: 'a>(values: impl IntoIterator<Item = &'a mut Value<T>>) {
    for v in values {
        if v.is_unknown() {
            *v = Value::Null;
        }
    }
}

/// Checks env var names and values, even when some values are still unknown.
pub fn check_env_vars(diags: &mut Diagnostics, env: &EnvMap) {
    let Value::Value(m) = env else {
        return;
    };
    for (k, val) in m {
        if val.is_null() {
            diags.error(
                "Invalid env_vars",
                format!("{k} is null: give it a value or remove it"),
                AttributePath::new("env_vars").key(k.clone()),
            );
        }
    }
    let known: BTreeMap<String, String> = m
        .iter()
        .map(|(k, v)| (k.clone(), v.as_ref_option().cloned().unwrap_or_default()))
        .collect();
    if let Err(e) = validate::env_vars("env_vars", &known) {
        field_error(diags, "Invalid env_vars", &e);
    }
}

/// Checks that `source_dir` is an existing folder.
pub fn check_source_dir(diags: &mut Diagnostics, dir: &Value<String>) {
    if let Value::Value(d) = dir
        && let Err(e) = check_dir(Path::new(d))
    {
        diags.error(
            "Invalid source_dir",
            e.to_string(),
            AttributePath::new("source_dir"),
        );
    }
}

/// The namespace recorded in state, else the provider's.
pub fn namespace_of(state: &Value<String>, c: &Configured) -> String {
    state
        .as_ref_option()
        .cloned()
        .unwrap_or_else(|| c.namespace.clone())
}

/// The resource's `wait_timeout_sec`, else `default`.
pub fn wait_timeout(v: &Value<i64>, default: Duration) -> Duration {
    match v {
        Value::Value(n) if *n > 0 => Duration::from_secs(*n as u64),
        _ => default,
    }
}

/// The planned value of an attribute for a patch: `None` (leave it as it
/// is) unless it differs from the prior value.
pub fn changed<T: Clone + PartialEq>(planned: &Value<T>, prior: &Value<T>) -> Option<T> {
    if planned == prior {
        None
    } else {
        planned.as_ref_option().cloned()
    }
}

/// Copies an optional API string into state (absent → null).
pub fn opt(v: &Option<String>) -> Value<String> {
    v.clone().map_or(Value::Null, Value::Value)
}

/// `id` and `namespace` of a resource about to be created: known once the
/// provider is configured and the name is known.
pub fn plan_location(
    c: Option<&Configured>,
    name: &Value<String>,
) -> (Value<String>, Value<String>) {
    match (c, name) {
        (Some(c), Value::Value(name)) => (
            Value::Value(format!("{}/{name}", c.namespace)),
            Value::Value(c.namespace.clone()),
        ),
        _ => (Value::Unknown, Value::Unknown),
    }
}

/// The provider's namespace when it differs from the one in state (a token
/// for another user): the resource must be replaced.
pub fn other_namespace(c: Option<&Configured>, prior: &Value<String>) -> Option<String> {
    match (c, prior) {
        (Some(c), Value::Value(p)) if c.namespace != *p => Some(c.namespace.clone()),
        _ => None,
    }
}

/// The error for a create that found the name taken.
pub fn already_exists(diags: &mut Diagnostics, kind: &str, name: &str, ns: &str) {
    diags.error(
        format!("{} {name} already exists", capitalized(kind)),
        format!(
            "a {kind} named {name} already exists in namespace {ns}; adopt it with `terraform import <address> {ns}/{name}`, delete it, or choose another name"
        ),
        AttributePath::new("name"),
    );
}

/// The name an import id `<namespace>/<name>` (or a bare `<name>`, meaning
/// the provider's namespace) designates. Another namespace than the token's
/// is refused: the operator would answer 403 for it anyway, and the state
/// would belong to someone else.
pub fn import_name(
    diags: &mut Diagnostics,
    c: &Configured,
    resource: &str,
    id: &str,
) -> Option<String> {
    let (ns, name) = match id.trim().split_once('/') {
        Some((ns, name)) => (ns.trim(), name.trim()),
        None => (c.namespace.as_str(), id.trim()),
    };
    if ns != c.namespace {
        diags.root_error(
            format!("Cannot import {id:?}: namespace {ns} is not yours"),
            format!(
                "{resource} can only import objects of the provider's namespace {ns_mine} (derived from the token's `sub`), and the id names namespace {ns}. Use `{ns_mine}/<name>` or just `<name>`, or configure the provider with a token of that namespace's user.",
                ns_mine = c.namespace
            ),
        );
        return None;
    }
    if let Err(e) = validate::name("name", name) {
        diags.root_error(
            format!("Invalid import id {id:?}"),
            format!(
                "expected `<namespace>/<name>` or `<name>`, e.g. `{}/hello`: {}",
                c.namespace, e.message
            ),
        );
        return None;
    }
    Some(name.to_string())
}

/// The error for an import of an object the operator does not have.
pub fn import_missing(diags: &mut Diagnostics, kind: &str, name: &str, ns: &str) {
    diags.root_error(
        format!("Cannot import {kind} {name}: it does not exist"),
        format!(
            "the operator has no {kind} named {name} in namespace {ns}; check the name (`terraform import <address> {ns}/<name>`)"
        ),
    );
}

/// Reads the `K` a data source's `name` designates in the provider's
/// namespace; a missing object is an error at `name`.
pub async fn read_named<K: Kind>(
    diags: &mut Diagnostics,
    shared: &Shared,
    name: &Value<String>,
) -> Option<(Arc<Configured>, K)> {
    let c = shared.get(diags)?;
    let Value::Value(name) = name else {
        diags.error_short(
            format!("The {} name is not known", K::NOUN),
            AttributePath::new("name"),
        );
        return None;
    };
    match c.client.get::<K>(&c.namespace, name).await {
        Ok(Some(k)) => Some((c, k)),
        Ok(None) => {
            diags.error(
                format!("{} {name} not found", capitalized(K::NOUN)),
                format!(
                    "the operator has no {noun} named {name} in namespace {ns} (the provider's token's namespace). Create it first, or check the name.",
                    noun = K::NOUN,
                    ns = c.namespace
                ),
                AttributePath::new("name"),
            );
            None
        }
        Err(e) => {
            api_error(diags, format!("Cannot read {} {name}", K::NOUN), &e);
            None
        }
    }
}

/// The error for a wait that ran out of time.
pub fn timed_out(
    diags: &mut Diagnostics,
    kind: &str,
    name: &str,
    target: &str,
    waited_sec: u64,
    last_seen: &str,
) {
    diags.root_error(
        format!("Timed out waiting for {kind} {name}"),
        format!(
            "gave up after {waited_sec} s waiting for {kind} {name} to become {target}; last seen: {last_seen}. Raise `wait_timeout_sec` (on the resource or the provider) if it is just slow"
        ),
    );
}

/// How a wait ended, once the common failures have become diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended<T> {
    /// The resource got where it should.
    Done(T),
    /// The resource failed, with the reason: the caller reports it.
    Failed(T, String),
    /// Timed out, gone or unreachable (already reported), with the last look.
    Reported(Option<T>),
}

/// Turns a timeout, a 404 or a client error of a [`poll`] into a diagnostic
/// naming the `kind`, `name` and the `target` state waited for.
pub fn ended<T>(
    diags: &mut Diagnostics,
    kind: &str,
    name: &str,
    target: &str,
    r: Result<Outcome<T>, ClientError>,
) -> Ended<T> {
    match r {
        Ok(Outcome::Done(t)) => Ended::Done(t),
        Ok(Outcome::Failed(t, why)) => Ended::Failed(t, why),
        Ok(Outcome::TimedOut {
            waited_sec,
            last_seen,
            last,
        }) => {
            timed_out(diags, kind, name, target, waited_sec, &last_seen);
            Ended::Reported(last)
        }
        Ok(Outcome::Gone) => {
            diags.root_error(
                format!("{} {name} disappeared", capitalized(kind)),
                format!("{kind} {name} was deleted while waiting for it to become {target}"),
            );
            Ended::Reported(None)
        }
        Err(e) => {
            api_error(diags, format!("Error waiting for {kind} {name}"), &e);
            Ended::Reported(None)
        }
    }
}

/// Why [`create`] has no object to give back (a diagnostic says so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCreated {
    /// The operator refused the create, or was never reached: nothing exists.
    Refused,
    /// The request reached the operator but its answer was lost (the
    /// connection broke, the operator died, the body was cut): it may have
    /// stored the object. The resource returns its planned location as a
    /// state with the error, so Terraform records it as tainted and the next
    /// apply deletes whatever was stored and creates it again, instead of
    /// finding the name taken forever.
    AnswerLost,
}

/// Creates a `K` named `name` in the provider's namespace. A taken name or
/// an API error becomes a diagnostic, except a taken name holding what an
/// interrupted create left ([`Kind::adoption_patch`]): that object is
/// adopted, given this configuration, with a warning.
pub async fn create<K: Kind>(
    diags: &mut Diagnostics,
    c: &Configured,
    name: &str,
    body: &K::Create,
) -> Result<K, NotCreated> {
    match c.client.create::<K>(&c.namespace, body).await {
        Ok(k) => Ok(k),
        Err(e) if e.is_code(ErrorCode::AlreadyExists) => {
            let adoption = adopt::<K>(c, name, body).await;
            match adoption {
                Adoption::Adopted(k) => {
                    diags.warning(
                        format!("Adopted {} {name} left by an interrupted apply", K::NOUN),
                        format!(
                            "{} {name} already existed in namespace {} with no code: what an \
                             apply leaves when it is interrupted after the operator stored its \
                             create, before Terraform could record it. It now has this \
                             configuration, is in the state and gets its code from this apply.",
                            capitalized(K::NOUN),
                            c.namespace
                        ),
                        AttributePath::new("name"),
                    );
                    Ok(k)
                }
                Adoption::Failed(e) => {
                    api_error(diags, format!("Cannot adopt {} {name}", K::NOUN), &e);
                    Err(NotCreated::Refused)
                }
                Adoption::NotLeftByAnApply => {
                    already_exists(diags, K::NOUN, name, &c.namespace);
                    Err(NotCreated::Refused)
                }
            }
        }
        Err(e) if e.may_have_reached_the_operator() => {
            // The transport error itself: `Unreachable`'s advice to check the
            // endpoint does not fit a request that got there.
            let why = match &e {
                ClientError::Unreachable { source, .. } => chain(source),
                other => chain(other),
            };
            diags.root_error(
                format!("Cannot create {} {name}: the answer was lost", K::NOUN),
                format!(
                    "{why}. The operator may have stored {} {name} before the answer was lost: \
                     Terraform records it as tainted, and the next apply deletes whatever \
                     was stored and creates it again.",
                    K::NOUN
                ),
            );
            Err(NotCreated::AnswerLost)
        }
        Err(e) => {
            api_error(diags, format!("Cannot create {} {name}", K::NOUN), &e);
            Err(NotCreated::Refused)
        }
    }
}

/// What [`adopt`] made of a name a create found taken.
enum Adoption<K> {
    /// It was what an interrupted create left, and now has the configuration.
    Adopted(K),
    /// It was, but the patch giving it the configuration failed.
    Failed(ClientError),
    /// Not an interrupted create's leftover (it has code, it is a trigger or
    /// it vanished): "already exists".
    NotLeftByAnApply,
}

/// Adopts the `K` named `name` if it is what an interrupted create left,
/// patching it to `body` (the configuration may have changed since).
async fn adopt<K: Kind>(c: &Configured, name: &str, body: &K::Create) -> Adoption<K> {
    let Ok(Some(left)) = c.client.get::<K>(&c.namespace, name).await else {
        return Adoption::NotLeftByAnApply;
    };
    let Some(patch) = left.adoption_patch(body) else {
        return Adoption::NotLeftByAnApply;
    };
    match c.client.update::<K>(&c.namespace, name, &patch).await {
        Ok(k) => Adoption::Adopted(k),
        Err(e) => Adoption::Failed(e),
    }
}

/// What `read` found of a resource.
#[derive(Debug)]
pub enum Fetched<K> {
    /// The operator has it: the configuration and the object.
    Found(Arc<Configured>, K),
    /// The operator answered 404: drop it from state so the plan recreates it.
    Gone,
    /// Nothing to refresh from (the provider is not configured, the state has
    /// no name, or the operator failed: a diagnostic says so): keep the state.
    Keep,
}

/// Reads the `K` a state names (its namespace, else the provider's).
pub async fn fetch<K: Kind>(
    diags: &mut Diagnostics,
    shared: &Shared,
    ns: &Value<String>,
    name: &Value<String>,
) -> Fetched<K> {
    let Some(c) = shared.get(diags) else {
        return Fetched::Keep;
    };
    let ns = namespace_of(ns, &c);
    let Some(name) = name.as_ref_option() else {
        return Fetched::Keep;
    };
    match c.client.get::<K>(&ns, name).await {
        Ok(Some(k)) => Fetched::Found(c, k),
        Ok(None) => Fetched::Gone,
        Err(e) => {
            api_error(diags, format!("Cannot read {} {name}", K::NOUN), &e);
            Fetched::Keep
        }
    }
}

/// Patches the `K` named `name`. An API error becomes a diagnostic (nothing
/// changed: Terraform keeps the prior state).
pub async fn update<K: Kind>(
    diags: &mut Diagnostics,
    c: &Configured,
    ns: &str,
    name: &str,
    patch: &K::Update,
) -> Option<K> {
    match c.client.update::<K>(ns, name, patch).await {
        Ok(k) => Some(k),
        Err(e) => {
            api_error(diags, format!("Cannot update {} {name}", K::NOUN), &e);
            None
        }
    }
}

/// Deletes the `K` a state names and waits until the operator answers 404;
/// adds a diagnostic and returns `None` when either fails.
pub async fn delete_and_wait<K: Kind>(
    diags: &mut Diagnostics,
    c: &Configured,
    ns: &Value<String>,
    name: &Value<String>,
    timeout: Duration,
) -> Option<()> {
    let ns = namespace_of(ns, c);
    let name = name.as_ref_option().cloned().unwrap_or_default();
    if let Err(e) = c.client.delete::<K>(&ns, &name).await {
        api_error(diags, format!("Cannot delete {} {name}", K::NOUN), &e);
        return None;
    }
    let (ns_ref, name_ref) = (ns.as_str(), name.as_str());
    let look = || async move {
        Ok(c.client
            .get::<K>(ns_ref, name_ref)
            .await?
            .map(|k| Look::Waiting(k, "still present".to_string())))
    };
    match poll(timeout, look).await {
        Ok(Outcome::Gone) => Some(()),
        r => {
            ended(diags, K::NOUN, &name, "deleted", r);
            None
        }
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A JSON text kept as the user wrote it when it means the same as the
/// operator's copy (so `jsonencode` formatting never shows as a diff).
pub fn same_json_or(state: &Value<String>, api: &str) -> Value<String> {
    if let Value::Value(s) = state
        && let (Ok(a), Ok(b)) = (
            serde_json::from_str::<serde_json::Value>(s),
            serde_json::from_str::<serde_json::Value>(api),
        )
        && a == b
    {
        return state.clone();
    }
    Value::Value(api.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_api_env_stays_null_when_the_state_had_none() {
        assert_eq!(env_from_api(&BTreeMap::new(), &Value::Null), Value::Null);
        let m = BTreeMap::from([("A".to_string(), "1".to_string())]);
        assert_eq!(known_env(&env_from_api(&m, &Value::Null)), Some(m.clone()));
        assert_eq!(known_env(&Value::Unknown), None);
    }

    #[test]
    fn equal_json_keeps_the_users_text() {
        let s = Value::Value("{\"a\": [1, 2]}".to_string());
        assert_eq!(same_json_or(&s, "{\"a\":[1,2]}"), s);
        assert_eq!(
            same_json_or(&s, "{\"a\":[1]}"),
            Value::Value("{\"a\":[1]}".to_string())
        );
        assert_eq!(capitalized("job"), "Job");
    }

    #[test]
    fn a_patch_carries_only_changed_values() {
        let a = Value::Value("a".to_string());
        assert_eq!(changed(&a, &a), None);
        assert_eq!(changed(&a, &Value::Null), Some("a".to_string()));
        assert_eq!(changed(&Value::Null, &a), None);
    }

    #[test]
    fn import_ids_name_an_object_of_the_tokens_namespace() {
        let shared = crate::test_support::configured("http://127.0.0.1:9", "alice");
        let c = shared.try_get().unwrap();
        let mut diags = Diagnostics::default();
        assert_eq!(
            import_name(&mut diags, &c, "sless_function", "hello").as_deref(),
            Some("hello")
        );
        assert_eq!(
            import_name(&mut diags, &c, "sless_function", "sless-2bd806c9/hello").as_deref(),
            Some("hello")
        );
        assert!(diags.errors.is_empty());
        assert_eq!(
            import_name(&mut diags, &c, "sless_function", "sless-00000000/hello"),
            None
        );
        assert!(
            diags.errors[0]
                .summary
                .contains("namespace sless-00000000 is not yours")
        );
        assert!(diags.errors[0].detail.contains("sless-2bd806c9"));
        for bad in ["", "sless-2bd806c9/", "Hello", "a/b/c"] {
            let mut diags = Diagnostics::default();
            assert_eq!(import_name(&mut diags, &c, "sless_job", bad), None, "{bad}");
            assert_eq!(diags.errors.len(), 1, "{bad}");
        }
    }

    #[test]
    fn limits_are_checked_with_paths() {
        let mut diags = Diagnostics::default();
        check_limits(
            &mut diags,
            Value::Value(1),
            Value::Value(0),
            Value::Value(0),
        );
        let paths: Vec<_> = diags.errors.iter().map(|d| d.attribute.clone()).collect();
        assert_eq!(
            paths,
            vec![
                AttributePath::new("memory_mb"),
                AttributePath::new("timeout_sec"),
                AttributePath::new("wait_timeout_sec")
            ]
        );
    }
}
