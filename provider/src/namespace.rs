//! The `sless_namespace` data source: tells the user which namespace their
//! token maps to (and the `sub` it was derived from).

use crate::fields::attr;
use crate::provider::Shared;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{
    Attribute, AttributeConstraint, AttributeType, Block, Description, Schema,
};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{DataSource, Diagnostics};

/// State of `data "sless_namespace"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceState {
    /// The namespace, `sless-` + 8 hex characters.
    #[serde(default)]
    pub namespace: Value<String>,
    /// The token's `sub` claim.
    #[serde(default)]
    pub sub: Value<String>,
}

/// The `sless_namespace` data source.
#[derive(Debug, Clone)]
pub struct NamespaceDataSource {
    shared: Shared,
}

impl NamespaceDataSource {
    /// A data source reading the provider's configuration.
    pub fn new(shared: Shared) -> Self {
        NamespaceDataSource { shared }
    }
}

fn computed(doc: &str) -> Attribute {
    attr(AttributeType::String, AttributeConstraint::Computed, doc)
}

#[async_trait::async_trait]
impl DataSource for NamespaceDataSource {
    type State<'a> = NamespaceState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                attributes: tf_provider::map! {
                    "namespace" => computed("Your namespace: `sless-` followed by the first 8 hex characters of sha256 of your token's `sub`."),
                    "sub" => computed("The `sub` claim of the provider's token.")
                },
                description: Description::markdown(
                    "The namespace the provider's token maps to. Every function you create lives in it.",
                ),
                ..Default::default()
            },
        })
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        _config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let c = self.shared.get(diags)?;
        Some(NamespaceState {
            namespace: Value::Value(c.namespace.clone()),
            sub: Value::Value(c.sub.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_state_keys_match, configured};

    #[tokio::test]
    async fn reads_the_configured_namespace() {
        let ds = NamespaceDataSource::new(configured("http://127.0.0.1:9", "alice"));
        let mut diags = Diagnostics::default();
        let s = ds
            .read(&mut diags, NamespaceState::default(), Value::Null)
            .await
            .unwrap();
        assert_eq!(s.namespace, Value::Value("sless-2bd806c9".to_string()));
        assert_eq!(s.sub, Value::Value("alice".to_string()));
    }

    #[tokio::test]
    async fn an_unconfigured_provider_is_an_error() {
        let ds = NamespaceDataSource::new(Shared::default());
        let mut diags = Diagnostics::default();
        assert!(
            ds.read(&mut diags, NamespaceState::default(), Value::Null)
                .await
                .is_none()
        );
        assert_eq!(diags.errors.len(), 1);
    }

    #[test]
    fn state_keys_match_the_schema() {
        let s = NamespaceDataSource::new(Shared::default())
            .schema(&mut Diagnostics::default())
            .unwrap();
        assert_state_keys_match::<NamespaceState>(&s);
    }
}
