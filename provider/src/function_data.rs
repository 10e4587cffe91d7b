//! The `sless_function` data source: reads an existing function of the
//! provider's namespace by name (one created by another configuration, say)
//! and exposes what the operator reports about it.

use crate::fields::{self, attr, opt};
use crate::provider::Shared;
use serde::{Deserialize, Serialize};
use sless_wire::Function;
use std::collections::BTreeMap;
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{DataSource, Diagnostics};

/// State of `data "sless_function"`; field names equal attribute names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionDataState {
    /// The function to read.
    #[serde(default)]
    pub name: Value<String>,
    /// `<namespace>/<name>`.
    #[serde(default)]
    pub id: Value<String>,
    /// The provider's namespace.
    #[serde(default)]
    pub namespace: Value<String>,
    /// Runtime.
    #[serde(default)]
    pub runtime: Value<String>,
    /// `module.function`.
    #[serde(default)]
    pub entrypoint: Value<String>,
    /// Plain environment variables.
    #[serde(default)]
    pub env_vars: Value<BTreeMap<String, Value<String>>>,
    /// Names of the secret environment variables (never their values).
    #[serde(default)]
    pub secret_env_var_names: Value<Vec<Value<String>>>,
    /// The operator's fingerprint of the secret environment variables.
    #[serde(default)]
    pub secret_env_vars_hash: Value<String>,
    /// Memory limit in MiB.
    #[serde(default)]
    pub memory_mb: Value<i64>,
    /// Per-invocation timeout in seconds.
    #[serde(default)]
    pub timeout_sec: Value<i64>,
    /// Processes kept when idle.
    #[serde(default)]
    pub min_instances: Value<i64>,
    /// Seconds without a request before scaling to zero.
    #[serde(default)]
    pub idle_timeout_sec: Value<i64>,
    /// Lifecycle phase.
    #[serde(default)]
    pub phase: Value<String>,
    /// Why the function is in its phase.
    #[serde(default)]
    pub message: Value<String>,
    /// The source hash recorded with the last upload.
    #[serde(default)]
    pub code_hash: Value<String>,
    /// Image reference of the last build.
    #[serde(default)]
    pub image_ref: Value<String>,
    /// Authenticated invoke URL.
    #[serde(default)]
    pub invoke_url: Value<String>,
    /// End of the last successful build.
    #[serde(default)]
    pub last_built_at: Value<String>,
}

/// The `sless_function` data source.
#[derive(Debug, Clone)]
pub struct FunctionDataSource {
    shared: Shared,
}

impl FunctionDataSource {
    /// A data source reading the provider's configuration from `shared`.
    pub fn new(shared: Shared) -> Self {
        FunctionDataSource { shared }
    }
}

/// The state of a function as the operator reports it.
fn state_of(f: &Function, invoke_url: String) -> FunctionDataState {
    FunctionDataState {
        name: Value::Value(f.name.clone()),
        id: Value::Value(format!("{}/{}", f.namespace, f.name)),
        namespace: Value::Value(f.namespace.clone()),
        runtime: Value::Value(f.spec.runtime.as_str().to_string()),
        entrypoint: Value::Value(f.spec.entrypoint.clone()),
        env_vars: Value::Value(
            f.spec
                .env_vars
                .iter()
                .map(|(k, v)| (k.clone(), Value::Value(v.clone())))
                .collect(),
        ),
        secret_env_var_names: Value::Value(
            f.spec
                .secret_env_vars
                .names
                .iter()
                .map(|n| Value::Value(n.clone()))
                .collect(),
        ),
        secret_env_vars_hash: fields::secret_hash_from_api(&f.spec.secret_env_vars),
        memory_mb: Value::Value(i64::from(f.spec.memory_mb)),
        timeout_sec: Value::Value(i64::from(f.spec.timeout_sec)),
        min_instances: Value::Value(i64::from(f.spec.min_instances)),
        idle_timeout_sec: Value::Value(i64::from(f.spec.idle_timeout_sec)),
        phase: Value::Value(f.status.phase.as_str().to_string()),
        message: opt(&f.status.message),
        code_hash: opt(&f.status.source_hash),
        image_ref: opt(&f.status.image_ref),
        invoke_url: Value::Value(invoke_url),
        last_built_at: opt(&f.status.last_built_at),
    }
}

#[async_trait::async_trait]
impl DataSource for FunctionDataSource {
    type State<'a> = FunctionDataState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::{Computed, Required};
        use AttributeType::{List, Map, Number, String};
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                attributes: tf_provider::map! {
                    "name" => attr(String, Required, "Name of an existing function in the provider's namespace."),
                    "id" => attr(String, Computed, "`<namespace>/<name>`."),
                    "namespace" => attr(String, Computed, "The namespace the function lives in: the provider's, derived from the token's `sub`."),
                    "runtime" => attr(String, Computed, "Language runtime, e.g. `python3.11`."),
                    "entrypoint" => attr(String, Computed, "`module.function`."),
                    "env_vars" => attr(Map(Box::new(String)), Computed, "The function's plain environment variables (an empty map when it has none)."),
                    "secret_env_var_names" => attr(List(Box::new(String)), Computed, "Names of the function's `secret_env_vars`, sorted. Their values never leave the operator."),
                    "secret_env_vars_hash" => attr(String, Computed, "The operator's fingerprint of the function's `secret_env_vars` (the resource's `secret_env_vars_hash`); null without secrets."),
                    "memory_mb" => attr(Number, Computed, "Memory limit in MiB."),
                    "timeout_sec" => attr(Number, Computed, "Per-invocation timeout in seconds."),
                    "min_instances" => attr(Number, Computed, "Processes kept running when idle (0: scales to zero)."),
                    "idle_timeout_sec" => attr(Number, Computed, "Seconds without a request before a function with `min_instances = 0` stops its process."),
                    "phase" => attr(String, Computed, "Lifecycle phase: Pending, Building, Ready, Failed or Deleting."),
                    "message" => attr(String, Computed, "Why the function is in its phase (e.g. the build error); null when there is nothing to say."),
                    "code_hash" => attr(String, Computed, "The `code_hash` recorded with the last code upload (sha256 of the normalised content of the uploader's `source_dir`); null when no code was uploaded."),
                    "image_ref" => attr(String, Computed, "Reference of the built image, where the backend has one."),
                    "invoke_url" => attr(String, Computed, "The authenticated invoke endpoint: send requests with `Authorization: Bearer <token>`."),
                    "last_built_at" => attr(String, Computed, "RFC 3339 time the last successful build finished.")
                },
                description: Description::markdown(
                    "Reads an existing function of your namespace by name.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        fields::check_name(diags, "function", &config.name);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let (c, f) = fields::read_named::<Function>(diags, &self.shared, &config.name).await?;
        let url = c.client.invoke_url(&f.namespace, &f.name);
        Some(state_of(&f, url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_only_name_is_required, assert_state_keys_match, configured};
    use tf_provider::AttributePath;

    fn ds() -> FunctionDataSource {
        FunctionDataSource::new(configured("http://127.0.0.1:9", "alice"))
    }

    #[test]
    fn state_keys_match_the_schema() {
        let s = ds().schema(&mut Diagnostics::default()).unwrap();
        assert_state_keys_match::<FunctionDataState>(&s);
        assert_only_name_is_required(&s);
    }

    #[tokio::test]
    async fn an_invalid_name_fails_validation_at_name() {
        let mut diags = Diagnostics::default();
        let cfg = FunctionDataState {
            name: Value::Value("Not_A_Name".into()),
            ..Default::default()
        };
        ds().validate(&mut diags, cfg).await;
        assert_eq!(diags.errors.len(), 1);
        assert_eq!(diags.errors[0].attribute, AttributePath::new("name"));
    }
}
