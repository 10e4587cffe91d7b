//! Helpers that turn validation and API errors into pathed Terraform
//! diagnostics.

use sless_wire::FieldError;
use tf_provider::{AttributePath, Diagnostics};

/// The attribute path of a wire field name: `memory_mb` → `memory_mb`,
/// `env_vars.FOO` → `env_vars["FOO"]`.
pub fn field_path(field: &str) -> AttributePath {
    match field.split_once('.') {
        Some((attr, key)) if attr == "env_vars" => {
            AttributePath::new(attr.to_string()).key(key.to_string())
        }
        _ => AttributePath::new(field.to_string()),
    }
}

/// Adds an error for a field that broke a validation rule.
pub fn field_error(diags: &mut Diagnostics, summary: &str, e: &FieldError) {
    diags.error(summary.to_string(), e.message.clone(), field_path(&e.field));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tf_provider::AttributePathStep;

    #[test]
    fn env_var_fields_become_map_keys() {
        let p = field_path("env_vars.FOO");
        assert_eq!(
            p.steps,
            vec![
                AttributePathStep::Attribute("env_vars".into()),
                AttributePathStep::Key("FOO".into())
            ]
        );
        assert_eq!(field_path("memory_mb"), AttributePath::new("memory_mb"));
    }
}
