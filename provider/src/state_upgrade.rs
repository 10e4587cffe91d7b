//! Upgrading a resource's Terraform state written under an older schema
//! version (`UpgradeResourceState`).
//!
//! Terraform records each resource's schema version in the state and asks the
//! provider to upgrade a state whose version is older than the schema's. The
//! rules (also in docs/decisions.md, 2026-12-05):
//!
//! - Adding an attribute needs no version bump: Terraform reads a missing
//!   attribute as null and the next refresh fills computed ones.
//! - Removing, renaming or retyping an attribute bumps [`SCHEMA_VERSION`] and
//!   adds a [`Step`] from the old version to [`STEPS`]; the attribute history
//!   in `provider/schema-history.json` records every attribute each version
//!   had, and a unit test fails when the schema and the history disagree.
//! - Version 0 is the state of a resource written before this provider had
//!   schema versions: by hand, or by the Go provider sless replaces, after
//!   `terraform state replace-provider`. Its step keeps the attributes this
//!   provider knows, drops the others, and fills `id`/`namespace` when the
//!   old state lacked them; the refresh that follows reads the rest from the
//!   operator.

use crate::provider::Shared;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};
use tf_provider::Diagnostics;
use tf_provider::RawValue;

/// The schema version of every sless resource.
pub const SCHEMA_VERSION: i64 = 1;

/// One upgrade step: rewrites the JSON object of a state at version `from`
/// into the shape of version `from + 1`.
pub struct Step {
    /// The version this step upgrades from.
    pub from: i64,
    /// Rewrites the state's attributes in place.
    pub apply: fn(&mut Map<String, Json>, &Identity),
}

/// What a step may need beyond the old state: the namespace of the
/// provider's token, when the provider is already configured.
#[derive(Debug, Default, Clone)]
pub struct Identity {
    /// The token's namespace.
    pub namespace: Option<String>,
}

/// The steps every resource takes, oldest first.
pub const STEPS: &[Step] = &[Step {
    from: 0,
    apply: from_unversioned,
}];

/// Upgrades the state of `resource` at `version` to [`SCHEMA_VERSION`]
/// through [`STEPS`]: what each resource's `Resource::upgrade` calls.
pub fn upgrade_resource<S: DeserializeOwned>(
    diags: &mut Diagnostics,
    resource: &str,
    version: i64,
    prior: &RawValue,
    shared: &Shared,
) -> Option<S> {
    let identity = Identity {
        namespace: shared.try_get().map(|c| c.namespace.clone()),
    };
    upgrade(
        diags,
        resource,
        version,
        prior,
        STEPS,
        SCHEMA_VERSION,
        &identity,
    )
}

/// Upgrades `prior` (the state of `resource` at `version`) to the current
/// schema through `steps`, or reports why it cannot.
pub fn upgrade<S: DeserializeOwned>(
    diags: &mut Diagnostics,
    resource: &str,
    version: i64,
    prior: &RawValue,
    steps: &[Step],
    current: i64,
    identity: &Identity,
) -> Option<S> {
    if version > current {
        diags.root_error(
            format!("The state of this {resource} was written by a newer sless provider"),
            format!(
                "Its schema version is {version}; this provider reads versions up to {current}. Use the provider version that wrote it, or a newer one."
            ),
        );
        return None;
    }
    if version < 0 {
        diags.root_error(
            format!("The state of this {resource} has an invalid schema version"),
            format!("Schema version {version} is negative; the state file was edited by hand."),
        );
        return None;
    }
    let mut object = match parse_object(prior) {
        Ok(o) => o,
        Err(detail) => {
            diags.root_error(
                format!("Cannot upgrade the state of this {resource}"),
                detail,
            );
            return None;
        }
    };
    for from in version..current {
        let Some(step) = steps.iter().find(|s| s.from == from) else {
            diags.root_error(
                format!("Cannot upgrade the state of this {resource}"),
                format!("This provider has no upgrade from schema version {from}."),
            );
            return None;
        };
        (step.apply)(&mut object, identity);
    }
    match serde_json::from_value(Json::Object(object)) {
        Ok(state) => Some(state),
        Err(e) => {
            diags.root_error(
                format!("Cannot upgrade the state of this {resource}"),
                format!("After upgrading to schema version {current}, the state does not fit the schema: {e}"),
            );
            None
        }
    }
}

/// The JSON object of a raw state (Terraform sends states as JSON).
fn parse_object(prior: &RawValue) -> Result<Map<String, Json>, String> {
    let RawValue::Json(bytes) = prior else {
        return Err("Terraform sent the old state as MessagePack, not JSON.".into());
    };
    match serde_json::from_slice(bytes) {
        Ok(Json::Object(o)) => Ok(o),
        Ok(other) => Err(format!(
            "The old state is not an object of attributes but {}.",
            json_kind(&other)
        )),
        Err(e) => Err(format!("The old state is not valid JSON: {e}")),
    }
}

fn json_kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

/// Version 0 → 1: `namespace` and `id` are derived when the old state lacks
/// them (from `id`, else the token's namespace). Attributes this provider
/// does not know are dropped when the state is decoded (the state types
/// ignore unknown fields); missing ones are null until the refresh.
fn from_unversioned(state: &mut Map<String, Json>, identity: &Identity) {
    let name = state.get("name").and_then(Json::as_str).map(str::to_owned);
    let id = state.get("id").and_then(Json::as_str).map(str::to_owned);
    let namespace = match state.get("namespace").and_then(Json::as_str) {
        Some(ns) if !ns.is_empty() => Some(ns.to_owned()),
        _ => id
            .as_deref()
            .and_then(|id| id.split_once('/'))
            .map(|(ns, _)| ns.to_owned())
            .or_else(|| identity.namespace.clone()),
    };
    if let Some(ns) = &namespace {
        state.insert("namespace".into(), Json::from(ns.clone()));
        if let Some(name) = &name {
            state.insert("id".into(), Json::from(format!("{ns}/{name}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::FunctionState;
    use crate::job::JobState;
    use crate::provider::SlessProvider;
    use crate::test_support::v;
    use std::collections::BTreeMap;
    use tf_provider::Provider;
    use tf_provider::schema::AttributeType;
    use tf_provider::value::Value;

    fn raw(j: Json) -> RawValue {
        RawValue::Json(serde_json::to_vec(&j).unwrap())
    }

    fn identity() -> Identity {
        Identity {
            namespace: Some("sless-2bd806c9".into()),
        }
    }

    fn errors(d: &Diagnostics) -> String {
        d.errors
            .iter()
            .map(|e| format!("{} {}", e.summary, e.detail))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn an_unversioned_state_keeps_what_the_provider_knows_and_drops_the_rest() {
        // A state of the kind the Go provider wrote: no namespace, no id,
        // an attribute this provider never had.
        let prior = raw(serde_json::json!({
            "name": "hello",
            "runtime": "python3.11",
            "entrypoint": "main.handler",
            "source_dir": "./src",
            "env_vars": {"GREETING": "hi"},
            "memory_mb": 256,
            "s3_key": "functions/hello.zip",
        }));
        let mut d = Diagnostics::default();
        let s: FunctionState =
            upgrade(&mut d, "sless_function", 0, &prior, STEPS, 1, &identity()).unwrap();
        assert!(d.errors.is_empty(), "{}", errors(&d));
        assert_eq!(s.name, v("hello"));
        assert_eq!(s.runtime, v("python3.11"));
        assert_eq!(s.memory_mb, Value::Value(256));
        assert_eq!(
            s.env_vars,
            Value::Value(BTreeMap::from([("GREETING".into(), v("hi"))]))
        );
        assert_eq!(s.namespace, v("sless-2bd806c9"));
        assert_eq!(s.id, v("sless-2bd806c9/hello"));
        // Computed attributes stay null: the refresh reads them.
        assert!(s.code_hash.is_null() && s.phase.is_null());
        let back = serde_json::to_value(&s).unwrap();
        assert!(back.get("s3_key").is_none(), "{back}");
    }

    #[test]
    fn an_unversioned_state_takes_its_namespace_from_its_id_before_the_token() {
        let prior = raw(serde_json::json!({"name": "nightly", "id": "sless-0000aaaa/nightly"}));
        let mut d = Diagnostics::default();
        let s: JobState = upgrade(&mut d, "sless_job", 0, &prior, STEPS, 1, &identity()).unwrap();
        assert_eq!(s.namespace, v("sless-0000aaaa"));
        assert_eq!(s.id, v("sless-0000aaaa/nightly"));
    }

    /// Two made-up later versions: 1 → 2 renames `memory` to `memory_mb`,
    /// 2 → 3 drops `legacy`. They stand for the steps a later schema change
    /// adds, and prove the chain runs each step once, in order.
    fn rename_memory(s: &mut Map<String, Json>, _: &Identity) {
        if let Some(m) = s.remove("memory") {
            s.insert("memory_mb".into(), m);
        }
    }
    fn drop_legacy(s: &mut Map<String, Json>, _: &Identity) {
        assert!(s.contains_key("memory_mb"), "steps ran out of order");
        s.remove("legacy");
        s.insert("timeout_sec".into(), Json::from(5));
    }
    const LATER: &[Step] = &[
        Step {
            from: 2,
            apply: drop_legacy,
        },
        Step {
            from: 0,
            apply: from_unversioned,
        },
        Step {
            from: 1,
            apply: rename_memory,
        },
    ];

    #[test]
    fn steps_chain_from_the_state_version_to_the_current_one() {
        let prior = raw(serde_json::json!({"name": "hello", "memory": 512, "legacy": true}));
        let mut d = Diagnostics::default();
        let s: FunctionState =
            upgrade(&mut d, "sless_function", 0, &prior, LATER, 3, &identity()).unwrap();
        assert_eq!(s.memory_mb, Value::Value(512));
        assert_eq!(s.timeout_sec, Value::Value(5));
        assert_eq!(s.id, v("sless-2bd806c9/hello"));
        // From version 2 only the last step runs.
        let prior = raw(serde_json::json!({"name": "hello", "memory_mb": 64, "memory": 1}));
        let s: FunctionState =
            upgrade(&mut d, "sless_function", 2, &prior, LATER, 3, &identity()).unwrap();
        assert_eq!(s.memory_mb, Value::Value(64));
        assert!(s.id.is_null(), "the version 0 step must not run");
        assert!(d.errors.is_empty(), "{}", errors(&d));
    }

    #[test]
    fn a_state_from_a_newer_provider_is_refused_with_both_versions() {
        let mut d = Diagnostics::default();
        let prior = raw(serde_json::json!({"name": "hello"}));
        let r: Option<FunctionState> =
            upgrade(&mut d, "sless_function", 7, &prior, STEPS, 1, &identity());
        assert!(r.is_none());
        let e = errors(&d);
        assert!(
            e.contains("newer sless provider") && e.contains('7') && e.contains("up to 1"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_step_or_a_broken_state_is_an_error_not_a_panic() {
        let prior = raw(serde_json::json!({"name": "hello"}));
        // (state version, current version, state, what the error says)
        for (version, current, prior, expected) in [
            (1, 2, prior.clone(), "no upgrade from schema version 1"),
            (-1, 1, prior.clone(), "negative"),
            (
                0,
                1,
                raw(serde_json::json!([1, 2])),
                "not an object of attributes but a list",
            ),
            (
                0,
                1,
                RawValue::Json(b"{\"name\":".to_vec()),
                "not valid JSON",
            ),
            (
                0,
                1,
                raw(serde_json::json!({"name": 5})),
                "does not fit the schema",
            ),
            (0, 1, RawValue::MessagePack(vec![0xc0]), "MessagePack"),
        ] {
            let mut d = Diagnostics::default();
            let r: Option<FunctionState> = upgrade(
                &mut d,
                "sless_function",
                version,
                &prior,
                STEPS,
                current,
                &identity(),
            );
            assert!(r.is_none(), "{expected}");
            let e = errors(&d);
            assert!(e.contains(expected), "wanted {expected:?} in {e}");
        }
    }

    /// `attr_type` as the history file writes it.
    fn type_name(t: &AttributeType) -> String {
        match t {
            AttributeType::String => "string".into(),
            AttributeType::Number => "number".into(),
            AttributeType::Bool => "bool".into(),
            AttributeType::List(t) => format!("list({})", type_name(t)),
            AttributeType::Set(t) => format!("set({})", type_name(t)),
            AttributeType::Map(t) => format!("map({})", type_name(t)),
            other => format!("{other:?}"),
        }
    }

    /// The schema history (`provider/schema-history.json`: resource →
    /// version → attribute → type) and the schema must agree, so that
    /// removing or retyping an attribute cannot ship without a version bump
    /// and an upgrade step.
    #[test]
    fn the_schema_history_records_every_attribute_and_forbids_silent_removals() {
        type History = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;
        let history: History =
            serde_json::from_str(include_str!("../schema-history.json")).unwrap();
        let mut d = Diagnostics::default();
        let resources = SlessProvider::default().get_resources(&mut d).unwrap();
        let mut problems = Vec::new();
        for (short, resource) in &resources {
            let name = &format!("sless_{short}");
            let schema = resource.schema(&mut d).unwrap();
            assert_eq!(schema.version, SCHEMA_VERSION, "{name}");
            let Some(versions) = history.get(name) else {
                problems.push(format!("{name} is missing from schema-history.json"));
                continue;
            };
            let current = versions.get(&SCHEMA_VERSION.to_string());
            let current = current.cloned().unwrap_or_default();
            for (attr, ty) in &current {
                match schema.block.attributes.get(attr) {
                    None => problems.push(format!(
                        "{name}.{attr} was removed: bump SCHEMA_VERSION, add an upgrade step from {SCHEMA_VERSION} and a new version to the history"
                    )),
                    Some(a) if &type_name(&a.attr_type) != ty => problems.push(format!(
                        "{name}.{attr} changed type from {ty} to {}: bump SCHEMA_VERSION and add an upgrade step",
                        type_name(&a.attr_type)
                    )),
                    Some(_) => {}
                }
            }
            for (attr, a) in &schema.block.attributes {
                if !current.contains_key(attr) {
                    problems.push(format!(
                        "{name}.{attr} is new: add \"{attr}\": \"{}\" to version {SCHEMA_VERSION} in schema-history.json (adding needs no bump)",
                        type_name(&a.attr_type)
                    ));
                }
            }
            for v in versions.keys() {
                let v: i64 = v.parse().unwrap();
                assert!(
                    v == SCHEMA_VERSION || STEPS.iter().any(|s| s.from == v),
                    "{name}: version {v} in the history has no upgrade step"
                );
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // Every step but the unversioned one starts at a version the history knows.
        for s in STEPS.iter().filter(|s| s.from > 0) {
            assert!(
                history
                    .values()
                    .all(|v| v.contains_key(&s.from.to_string()))
            );
        }
    }
}
