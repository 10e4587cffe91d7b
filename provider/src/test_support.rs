//! Helpers shared by the unit tests of the resources: what Terraform would
//! send (the proposed new state of an update), plan and validate calls with
//! their diagnostics checked, a configured provider and a source folder.

use crate::client::Client;
use crate::provider::{Configured, Shared};
use crate::source::Snapshot;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;
use tf_provider::schema::{AttributeConstraint, Schema};
use tf_provider::value::{Value, ValueAny, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

/// A resource of this provider whose state is `S` (none of them keeps a
/// private or a provider-meta state).
pub trait TestResource<S>:
    for<'a> Resource<State<'a> = S, PrivateState<'a> = ValueEmpty, ProviderMetaState<'a> = ValueEmpty>
{
}

impl<S, R> TestResource<S> for R where
    R: for<'a> Resource<
            State<'a> = S,
            PrivateState<'a> = ValueEmpty,
            ProviderMetaState<'a> = ValueEmpty,
        >
{
}

/// A known string.
pub fn v(s: &str) -> Value<String> {
    Value::Value(s.to_string())
}

/// A provider configured for `endpoint` with a token whose `sub` is `sub`
/// (nothing listens there: only planning works).
pub fn configured(endpoint: &str, sub: &str) -> Shared {
    Shared::configured(Configured {
        client: Client::new(endpoint, "t", Duration::from_secs(1)).unwrap(),
        sub: sub.into(),
        namespace: sless_wire::namespace_for_sub(sub),
        wait_timeout: Duration::from_secs(1),
    })
}

/// A temporary source folder holding one file.
pub fn source_dir(file: &str, content: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join(file), content).unwrap();
    d
}

/// The `code_hash` of the folder `source_dir` names now.
pub fn code_hash(source_dir: &Value<String>) -> Value<String> {
    let dir = source_dir.as_ref_option().unwrap();
    v(&Snapshot::read(Path::new(dir)).unwrap().hash())
}

/// The keys of a default state, serialized like Terraform sends it, equal
/// the schema's attribute names.
pub fn assert_state_keys_match<S: Serialize + Default>(schema: &Schema) {
    let bytes = rmp_serde::to_vec_named(&S::default()).unwrap();
    let m: HashMap<String, serde::de::IgnoredAny> = rmp_serde::from_slice(&bytes).unwrap();
    let mut keys: Vec<_> = m.keys().cloned().collect();
    keys.sort();
    let mut want: Vec<_> = schema.block.attributes.keys().cloned().collect();
    want.sort();
    assert_eq!(keys, want);
}

/// A data source's schema: `name` is the one required attribute, every
/// other attribute is computed.
pub fn assert_only_name_is_required(schema: &Schema) {
    for (name, a) in &schema.block.attributes {
        let want = if name == "name" {
            AttributeConstraint::Required
        } else {
            AttributeConstraint::Computed
        };
        assert_eq!(a.constraint, want, "{name}");
    }
}

/// The schema of `r`.
pub fn schema_of<S>(r: &impl TestResource<S>) -> Schema {
    r.schema(&mut Diagnostics::default()).unwrap()
}

/// Terraform's proposed new state for an update: the config's values, but
/// the prior ones for computed attributes and for optional+computed ones
/// the config leaves out.
pub fn proposed<S: Serialize + DeserializeOwned>(schema: &Schema, prior: &S, cfg: &S) -> S {
    let prior = attributes(prior);
    let mut p = attributes(cfg);
    for (name, a) in &schema.block.attributes {
        let from_prior = match a.constraint {
            AttributeConstraint::Computed => true,
            AttributeConstraint::OptionalComputed => p[name] == ValueAny::Null,
            _ => false,
        };
        if from_prior {
            p.insert(name.clone(), prior[name].clone());
        }
    }
    rmp_serde::from_slice(&rmp_serde::to_vec_named(&p).unwrap()).unwrap()
}

/// A state as Terraform's attribute map.
fn attributes<S: Serialize>(s: &S) -> BTreeMap<String, ValueAny> {
    rmp_serde::from_slice(&rmp_serde::to_vec_named(s).unwrap()).unwrap()
}

/// `plan_create` of a new resource configured as `cfg`; it must not fail.
pub async fn plan_create<S: Clone>(r: &impl TestResource<S>, cfg: &S) -> S {
    let mut diags = Diagnostics::default();
    let planned = r
        .plan_create(&mut diags, cfg.clone(), cfg.clone(), Value::Null)
        .await;
    assert!(diags.errors.is_empty(), "{:?}", diags.errors);
    planned.unwrap().0
}

/// `plan_update` from `prior` to `cfg`, with Terraform's proposed state; it
/// must not fail. The planned state and the attributes forcing replacement.
pub async fn plan_update<S>(r: &impl TestResource<S>, prior: &S, cfg: &S) -> (S, Vec<AttributePath>)
where
    S: Clone + Serialize + DeserializeOwned,
{
    let mut diags = Diagnostics::default();
    let (planned, _, replace) = r
        .plan_update(
            &mut diags,
            prior.clone(),
            proposed(&schema_of(r), prior, cfg),
            cfg.clone(),
            Value::Null,
            Value::Null,
        )
        .await
        .unwrap();
    assert!(diags.errors.is_empty(), "{:?}", diags.errors);
    (planned, replace)
}

/// Like [`plan_update`], for a change that must be made in place.
pub async fn plan_in_place<S>(r: &impl TestResource<S>, prior: &S, cfg: &S) -> S
where
    S: Clone + Serialize + DeserializeOwned,
{
    let (planned, replace) = plan_update(r, prior, cfg).await;
    assert!(replace.is_empty(), "{replace:?}");
    planned
}

/// The attribute paths of the errors `validate` finds in `cfg`.
pub async fn validate_errors<S>(r: &impl TestResource<S>, cfg: S) -> Vec<AttributePath> {
    let mut diags = Diagnostics::default();
    r.validate(&mut diags, cfg).await;
    diags.errors.into_iter().map(|d| d.attribute).collect()
}

mod tests {
    use super::*;
    use crate::function::{FunctionResource, FunctionState};

    #[test]
    fn proposed_takes_config_values_and_prior_computed_ones() {
        let prior = FunctionState {
            name: v("a"),
            runtime: v("python3.11"),
            memory_mb: Value::Value(256),
            timeout_sec: Value::Value(60),
            phase: v("Ready"),
            ..Default::default()
        };
        let cfg = FunctionState {
            name: v("b"),
            runtime: Value::Unknown,
            timeout_sec: Value::Value(5),
            ..Default::default()
        };
        let schema = schema_of(&FunctionResource::new(Shared::default()));
        let p = proposed(&schema, &prior, &cfg);
        assert_eq!(p.name, v("b"));
        assert_eq!(p.runtime, Value::Unknown);
        assert_eq!(p.memory_mb, Value::Value(256));
        assert_eq!(p.timeout_sec, Value::Value(5));
        assert_eq!(p.phase, v("Ready"));
    }
}
