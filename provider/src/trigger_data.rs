//! The `sless_trigger` data source: reads an existing trigger of the
//! provider's namespace by name and exposes its kind, target, schedule,
//! public URL and phase as the operator reports them.

use crate::fields::{self, attr, opt};
use crate::provider::Shared;
use crate::trigger::phase_str;
use serde::{Deserialize, Serialize};
use sless_wire::Trigger;
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{DataSource, Diagnostics};

/// State of `data "sless_trigger"`; field names equal attribute names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriggerDataState {
    /// The trigger to read.
    #[serde(default)]
    pub name: Value<String>,
    /// `<namespace>/<name>`.
    #[serde(default)]
    pub id: Value<String>,
    /// The provider's namespace.
    #[serde(default)]
    pub namespace: Value<String>,
    /// The function it calls.
    #[serde(default)]
    pub function: Value<String>,
    /// `http` or `cron`.
    #[serde(default, rename = "type")]
    pub trigger_type: Value<String>,
    /// Cron schedule.
    #[serde(default)]
    pub schedule: Value<String>,
    /// JSON body of cron invocations.
    #[serde(default)]
    pub payload: Value<String>,
    /// Whether it serves / fires.
    #[serde(default)]
    pub enabled: Value<bool>,
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

/// The `sless_trigger` data source.
#[derive(Debug, Clone)]
pub struct TriggerDataSource {
    shared: Shared,
}

impl TriggerDataSource {
    /// A data source reading the provider's configuration from `shared`.
    pub fn new(shared: Shared) -> Self {
        TriggerDataSource { shared }
    }
}

/// The state of a trigger as the operator reports it.
fn state_of(t: &Trigger) -> TriggerDataState {
    TriggerDataState {
        name: Value::Value(t.name.clone()),
        id: Value::Value(format!("{}/{}", t.namespace, t.name)),
        namespace: Value::Value(t.namespace.clone()),
        function: Value::Value(t.spec.function.clone()),
        trigger_type: Value::Value(t.spec.trigger_type.as_str().to_string()),
        schedule: opt(&t.spec.schedule),
        payload: opt(&t.spec.payload),
        enabled: Value::Value(t.spec.enabled),
        url: opt(&t.status.url),
        phase: Value::Value(phase_str(t.status.phase).to_string()),
        next_run_at: opt(&t.status.next_run_at),
        last_run_at: opt(&t.status.last_run.as_ref().map(|r| r.completed_at.clone())),
    }
}

#[async_trait::async_trait]
impl DataSource for TriggerDataSource {
    type State<'a> = TriggerDataState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        use AttributeConstraint::{Computed, Required};
        use AttributeType::{Bool, String};
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                attributes: tf_provider::map! {
                    "name" => attr(String, Required, "Name of an existing trigger in the provider's namespace."),
                    "id" => attr(String, Computed, "`<namespace>/<name>`."),
                    "namespace" => attr(String, Computed, "The namespace the trigger lives in: the provider's, derived from the token's `sub`."),
                    "function" => attr(String, Computed, "Name of the function the trigger calls."),
                    "type" => attr(String, Computed, "`http` or `cron`."),
                    "schedule" => attr(String, Computed, "The cron schedule (cron); null for http triggers."),
                    "payload" => attr(String, Computed, "JSON text sent as the body of each cron invocation; null when there is none."),
                    "enabled" => attr(Bool, Computed, "Whether the trigger serves (http) or fires (cron)."),
                    "url" => attr(String, Computed, "The public URL of an http trigger (no token needed); null for cron triggers."),
                    "phase" => attr(String, Computed, "Active, Waiting (its function is not Ready or does not exist) or Disabled."),
                    "next_run_at" => attr(String, Computed, "RFC 3339 time of the next scheduled run (cron)."),
                    "last_run_at" => attr(String, Computed, "RFC 3339 end of the last finished run (cron).")
                },
                description: Description::markdown(
                    "Reads an existing trigger of your namespace by name.",
                ),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        fields::check_name(diags, "trigger", &config.name);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let (_, t) = fields::read_named::<Trigger>(diags, &self.shared, &config.name).await?;
        Some(state_of(&t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_only_name_is_required, assert_state_keys_match, configured};
    use tf_provider::AttributePath;

    fn ds() -> TriggerDataSource {
        TriggerDataSource::new(configured("http://127.0.0.1:9", "alice"))
    }

    #[test]
    fn state_keys_match_the_schema() {
        let s = ds().schema(&mut Diagnostics::default()).unwrap();
        assert_state_keys_match::<TriggerDataState>(&s);
        assert_only_name_is_required(&s);
    }

    #[tokio::test]
    async fn an_unreachable_operator_is_an_error_not_a_panic() {
        let mut diags = Diagnostics::default();
        let cfg = TriggerDataState {
            name: Value::Value("web".into()),
            ..Default::default()
        };
        assert!(ds().read(&mut diags, cfg, Value::Null).await.is_none());
        assert_eq!(diags.errors.len(), 1);
        assert!(diags.errors[0].summary.contains("Cannot read trigger web"));
        let mut diags = Diagnostics::default();
        let cfg = TriggerDataState {
            name: Value::Value("Bad Name".into()),
            ..Default::default()
        };
        ds().validate(&mut diags, cfg).await;
        assert_eq!(diags.errors[0].attribute, AttributePath::new("name"));
    }
}
