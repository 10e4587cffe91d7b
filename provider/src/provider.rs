//! The provider block: its schema, validation and `configure`, which checks
//! the token, derives the user's namespace from its `sub` and ensures the
//! namespace exists on the operator, once per Terraform run.

use crate::client::{self, Client, ClientError};
use crate::fields::{attr, check_timeout};
use crate::function::FunctionResource;
use crate::function_data::FunctionDataSource;
use crate::job::JobResource;
use crate::namespace::NamespaceDataSource;
use crate::service::ServiceResource;
use crate::token;
use crate::trigger::TriggerResource;
use crate::trigger_data::TriggerDataSource;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tf_provider::schema::{
    Attribute, AttributeConstraint, AttributeType, Block, Description, Schema,
};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, DynamicDataSource, DynamicResource, Provider};

/// Environment variable for `endpoint`.
pub const ENV_ENDPOINT: &str = "SLESS_ENDPOINT";
/// Environment variable for `token`.
pub const ENV_TOKEN: &str = "SLESS_TOKEN";
/// Environment variable for `nubes_endpoint`.
pub const ENV_NUBES_ENDPOINT: &str = "NUBES_ENDPOINT";
/// Default `request_timeout_sec`.
pub const REQUEST_TIMEOUT_SEC_DEFAULT: i64 = 60;
/// Default `wait_timeout_sec`: how long create/update/delete wait.
pub const WAIT_TIMEOUT_SEC_DEFAULT: i64 = 600;
/// Largest accepted timeout, in seconds (one day).
pub const TIMEOUT_SEC_LIMIT: i64 = 86_400;

/// The provider block as Terraform sends it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// Operator base URL.
    #[serde(default)]
    pub endpoint: Value<String>,
    /// The user's JWT.
    #[serde(default)]
    pub token: Value<String>,
    /// Optional cloud API URL the token is checked against.
    #[serde(default)]
    pub nubes_endpoint: Value<String>,
    /// Per-request timeout in seconds.
    #[serde(default)]
    pub request_timeout_sec: Value<i64>,
    /// Default wait timeout of resources in seconds.
    #[serde(default)]
    pub wait_timeout_sec: Value<i64>,
}

/// What `configure` established, shared with every resource and data source.
#[derive(Debug)]
pub struct Configured {
    /// The operator client.
    pub client: Client,
    /// The token's `sub`.
    pub sub: String,
    /// The namespace derived from `sub`.
    pub namespace: String,
    /// Default wait timeout for resources.
    pub wait_timeout: Duration,
}

/// A slot `configure` fills; resources get a clone at start-up.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    configured: Arc<RwLock<Option<Arc<Configured>>>>,
    /// The calling Terraform's version, e.g. `1.11.4` (set by `configure`
    /// even when the rest of the configuration is not known yet).
    terraform_version: Arc<RwLock<Option<String>>>,
}

/// Writes `value` into `slot`, a poisoned lock notwithstanding.
fn store<T>(slot: &RwLock<Option<T>>, value: T) {
    let mut guard = match slot.write() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    *guard = Some(value);
}

/// Reads `slot`, a poisoned lock notwithstanding.
fn load<T: Clone>(slot: &RwLock<Option<T>>) -> Option<T> {
    match slot.read() {
        Ok(g) => g.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

impl Shared {
    /// A slot already filled (for tests and tools).
    pub fn configured(c: Configured) -> Shared {
        let s = Shared::default();
        s.set(c);
        s
    }

    fn set(&self, c: Configured) {
        store(&self.configured, Arc::new(c));
    }

    /// Records the calling Terraform's version.
    pub fn set_terraform_version(&self, version: &str) {
        store(&self.terraform_version, version.to_string());
    }

    /// The calling Terraform's version, once `configure` has run.
    pub fn terraform_version(&self) -> Option<String> {
        load(&self.terraform_version)
    }

    /// The configuration, if `configure` succeeded.
    pub fn try_get(&self) -> Option<Arc<Configured>> {
        load(&self.configured)
    }

    /// The configuration, or an error diagnostic explaining why there is none.
    pub fn get(&self, diags: &mut Diagnostics) -> Option<Arc<Configured>> {
        let c = self.try_get();
        if c.is_none() {
            diags.root_error(
                "The sless provider is not configured",
                "Its `endpoint` or `token` was not known yet (they depend on values computed during apply) or configuring it failed. Set them from values known at plan time.",
            );
        }
        c
    }
}

/// The `sless` provider.
#[derive(Debug, Default, Clone)]
pub struct SlessProvider {
    shared: Shared,
}

/// A value from the config, else from an environment variable. `Unknown`
/// stays unknown; an empty string counts as unset.
fn from_env(v: &Value<String>, env: &str) -> Value<String> {
    match v {
        Value::Value(s) if !s.trim().is_empty() => Value::Value(s.trim().to_string()),
        Value::Unknown => Value::Unknown,
        _ => match std::env::var(env) {
            Ok(s) if !s.trim().is_empty() => Value::Value(s.trim().to_string()),
            _ => Value::Null,
        },
    }
}

fn check_url(diags: &mut Diagnostics, name: &'static str, env: &str, url: &str) -> bool {
    if url.starts_with("http://") || url.starts_with("https://") {
        return true;
    }
    diags.error(
        format!("Invalid {name}"),
        format!("{url:?} (from `{name}` or {env}) is not an http:// or https:// URL"),
        AttributePath::new(name),
    );
    false
}

/// Adds the diagnostic for an ensure-namespace failure.
fn namespace_error(diags: &mut Diagnostics, ns: &str, e: &ClientError) {
    match e {
        ClientError::Unreachable { .. } => diags.root_error(
            "Cannot reach the sless operator",
            client::chain(e),
        ),
        ClientError::Unauthorized(api) => diags.error(
            "The operator rejected the token",
            format!(
                "the operator rejected the token: {}. Check that `token` (or SLESS_TOKEN) is current and was issued for this operator.",
                api.message
            ),
            AttributePath::new("token"),
        ),
        _ => diags.root_error(
            format!("Cannot ensure namespace {ns} on the operator"),
            e.to_string(),
        ),
    }
}

#[async_trait::async_trait]
impl Provider for SlessProvider {
    type Config<'a> = ProviderConfig;
    type MetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::Optional;
        use AttributeType::{Number, String};
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                attributes: tf_provider::map! {
                    "endpoint" => attr(String, Optional, "Base URL of the sless operator, e.g. `http://127.0.0.1:8080`. Env: `SLESS_ENDPOINT`."),
                    "token" => Attribute {
                        sensitive: true,
                        ..attr(String, Optional, "Your JWT issued by Nubes. Its `sub` claim selects your namespace. Env: `SLESS_TOKEN`.")
                    },
                    "nubes_endpoint" => attr(String, Optional, "Optional URL of the Nubes API. When set, the token is checked with an authenticated GET there before anything else. Env: `NUBES_ENDPOINT`."),
                    "request_timeout_sec" => attr(Number, Optional, "Timeout of each HTTP request to the operator, in seconds (default 60)."),
                    "wait_timeout_sec" => attr(Number, Optional, "Default time resources wait for a function to become Ready or be deleted, in seconds (default 600). A resource's own `wait_timeout_sec` wins.")
                },
                description: Description::markdown(
                    "The sless provider deploys serverless functions to a sless operator. Your namespace is derived from the `sub` claim of your token.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::Config<'a>) -> Option<()> {
        check_timeout(diags, "request_timeout_sec", &config.request_timeout_sec);
        check_timeout(diags, "wait_timeout_sec", &config.wait_timeout_sec);
        if let Value::Value(url) = &config.endpoint {
            check_url(diags, "endpoint", ENV_ENDPOINT, url);
        }
        if let Value::Value(url) = &config.nubes_endpoint {
            check_url(diags, "nubes_endpoint", ENV_NUBES_ENDPOINT, url);
        }
        Some(())
    }

    async fn configure<'a>(
        &self,
        diags: &mut Diagnostics,
        terraform_version: String,
        config: Self::Config<'a>,
    ) -> Option<()> {
        self.shared.set_terraform_version(&terraform_version);
        let endpoint = from_env(&config.endpoint, ENV_ENDPOINT);
        let token = from_env(&config.token, ENV_TOKEN);
        let nubes = from_env(&config.nubes_endpoint, ENV_NUBES_ENDPOINT);
        if endpoint.is_unknown() || token.is_unknown() || nubes.is_unknown() {
            // Plan with values computed during apply: nothing to talk to yet.
            return Some(());
        }
        let Value::Value(endpoint) = endpoint else {
            diags.error(
                "Missing sless operator endpoint",
                "Set `endpoint` in the provider block or the SLESS_ENDPOINT environment variable to the operator's base URL, e.g. http://127.0.0.1:8080.",
                AttributePath::new("endpoint"),
            );
            return None;
        };
        let Value::Value(token) = token else {
            diags.error(
                "Missing token",
                "Set `token` in the provider block or the SLESS_TOKEN environment variable to your Nubes JWT.",
                AttributePath::new("token"),
            );
            return None;
        };
        if !check_url(diags, "endpoint", ENV_ENDPOINT, &endpoint) {
            return None;
        }
        let request_timeout = Duration::from_secs(
            config
                .request_timeout_sec
                .unwrap_or(REQUEST_TIMEOUT_SEC_DEFAULT)
                .clamp(1, TIMEOUT_SEC_LIMIT) as u64,
        );
        let wait_timeout = Duration::from_secs(
            config
                .wait_timeout_sec
                .unwrap_or(WAIT_TIMEOUT_SEC_DEFAULT)
                .clamp(1, TIMEOUT_SEC_LIMIT) as u64,
        );
        if let Value::Value(nubes) = &nubes {
            if !check_url(diags, "nubes_endpoint", ENV_NUBES_ENDPOINT, nubes) {
                return None;
            }
            if let Err(msg) = client::check_token_with_cloud(nubes, &token, request_timeout).await {
                diags.error(
                    "The cloud rejected the token",
                    msg,
                    AttributePath::new("token"),
                );
                return None;
            }
        }
        let sub = match token::sub_of(&token) {
            Ok(s) => s,
            Err(e) => {
                diags.error("Invalid token", e.to_string(), AttributePath::new("token"));
                return None;
            }
        };
        let namespace = sless_wire::namespace_for_sub(&sub);
        let client = match Client::new(&endpoint, &token, request_timeout) {
            Ok(c) => c,
            Err(e) => {
                diags.root_error("Cannot create the HTTP client", e);
                return None;
            }
        };
        if let Err(e) = client.ensure_namespace(&namespace).await {
            namespace_error(diags, &namespace, &e);
            return None;
        }
        tracing::info!(endpoint = %endpoint, namespace = %namespace, "configured");
        self.shared.set(Configured {
            client,
            sub,
            namespace,
            wait_timeout,
        });
        Some(())
    }

    fn get_resources(
        &self,
        _diags: &mut Diagnostics,
    ) -> Option<HashMap<String, Box<dyn DynamicResource>>> {
        let mut m: HashMap<String, Box<dyn DynamicResource>> = HashMap::new();
        m.insert(
            "function".into(),
            Box::new(FunctionResource::new(self.shared.clone())),
        );
        m.insert(
            "job".into(),
            Box::new(JobResource::new(self.shared.clone())),
        );
        m.insert(
            "service".into(),
            Box::new(ServiceResource::new(self.shared.clone())),
        );
        m.insert(
            "trigger".into(),
            Box::new(TriggerResource::new(self.shared.clone())),
        );
        Some(m)
    }

    fn get_data_sources(
        &self,
        _diags: &mut Diagnostics,
    ) -> Option<HashMap<String, Box<dyn DynamicDataSource>>> {
        let mut m: HashMap<String, Box<dyn DynamicDataSource>> = HashMap::new();
        m.insert(
            "namespace".into(),
            Box::new(NamespaceDataSource::new(self.shared.clone())),
        );
        m.insert(
            "function".into(),
            Box::new(FunctionDataSource::new(self.shared.clone())),
        );
        m.insert(
            "trigger".into(),
            Box::new(TriggerDataSource::new(self.shared.clone())),
        );
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keys_match_the_schema() {
        let schema = SlessProvider::default()
            .schema(&mut Diagnostics::default())
            .unwrap();
        crate::test_support::assert_state_keys_match::<ProviderConfig>(&schema);
    }

    #[tokio::test]
    async fn configure_without_endpoint_names_it() {
        let p = SlessProvider::default();
        let mut diags = Diagnostics::default();
        let cfg = ProviderConfig {
            endpoint: Value::Value(String::new()),
            ..Default::default()
        };
        // SLESS_ENDPOINT may be set in a developer's shell: only assert when it is not.
        if std::env::var_os(ENV_ENDPOINT).is_none() {
            assert!(p.configure(&mut diags, "1.0.3".into(), cfg).await.is_none());
            assert_eq!(diags.errors[0].attribute, AttributePath::new("endpoint"));
        }
    }

    #[tokio::test]
    async fn configure_with_a_token_without_sub_names_the_token() {
        use base64::Engine;
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let tok = format!("{}.{}.sig", e.encode("{}"), e.encode(r#"{"iss":"x"}"#));
        let p = SlessProvider::default();
        let mut diags = Diagnostics::default();
        let cfg = ProviderConfig {
            endpoint: Value::Value("http://127.0.0.1:9".into()),
            token: Value::Value(tok),
            nubes_endpoint: Value::Value(String::new()),
            ..Default::default()
        };
        if std::env::var_os(ENV_NUBES_ENDPOINT).is_none() {
            assert!(p.configure(&mut diags, "1.0.3".into(), cfg).await.is_none());
            assert_eq!(diags.errors[0].attribute, AttributePath::new("token"));
            assert!(diags.errors[0].summary.contains("Invalid token"));
            assert!(diags.errors[0].detail.contains("sub"));
        }
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_is_named() {
        use base64::Engine;
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let tok = format!("{}.{}.sig", e.encode("{}"), e.encode(r#"{"sub":"alice"}"#));
        // A port nothing listens on: bind, learn the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let p = SlessProvider::default();
        let mut diags = Diagnostics::default();
        let cfg = ProviderConfig {
            endpoint: Value::Value(url.clone()),
            token: Value::Value(tok),
            nubes_endpoint: Value::Value(String::new()),
            request_timeout_sec: Value::Value(5),
            ..Default::default()
        };
        if std::env::var_os(ENV_NUBES_ENDPOINT).is_none() {
            assert!(p.configure(&mut diags, "1.0.3".into(), cfg).await.is_none());
            assert!(diags.errors[0].summary.contains("Cannot reach"));
            assert!(
                diags.errors[0].detail.contains(&url),
                "{}",
                diags.errors[0].detail
            );
        }
    }

    #[tokio::test]
    async fn unknown_values_at_plan_time_do_not_fail() {
        let p = SlessProvider::default();
        let mut diags = Diagnostics::default();
        let cfg = ProviderConfig {
            endpoint: Value::Unknown,
            token: Value::Unknown,
            ..Default::default()
        };
        assert!(p.configure(&mut diags, "1.0.3".into(), cfg).await.is_some());
        assert!(diags.errors.is_empty());
        assert!(p.shared.try_get().is_none());
    }
}
