//! Helpers that turn validation and API errors into pathed Terraform
//! diagnostics.

use sless_wire::FieldError;
use tf_provider::{AttributePath, Diagnostics};

/// The secret maps. Terraform prints the source lines of the attribute a
/// diagnostic points at, and those lines may hold the secret values, so a
/// diagnostic about them points at the resource and names the field in its
/// detail instead.
const SECRET_MAPS: [&str; 2] = ["secret_env_vars", "secret_env_vars_wo"];

/// True for `secret_env_vars`, `secret_env_vars_wo` and their keys.
fn is_secret_field(field: &str) -> bool {
    let attr = field.split_once('.').map_or(field, |(a, _)| a);
    SECRET_MAPS.contains(&attr)
}

/// The attribute path of a wire field name: `memory_mb` → `memory_mb`,
/// `env_vars.FOO` → `env_vars["FOO"]`, a secret map's field → the resource
/// (see [`SECRET_MAPS`]).
pub fn field_path(field: &str) -> AttributePath {
    match field.split_once('.') {
        Some(("env_vars", key)) => AttributePath::new("env_vars").key(key.to_string()),
        _ if is_secret_field(field) => AttributePath::root(),
        _ => AttributePath::new(field.to_string()),
    }
}

/// Adds an error for a field that broke a validation rule (a secret map's
/// field is named in the detail, since the path cannot show it).
pub fn field_error(diags: &mut Diagnostics, summary: &str, e: &FieldError) {
    let detail = if is_secret_field(&e.field) {
        format!("{}: {}", e.field, e.message)
    } else {
        e.message.clone()
    };
    diags.error(summary.to_string(), detail, field_path(&e.field));
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
        for secret in [
            "secret_env_vars.TOKEN",
            "secret_env_vars_wo",
            "secret_env_vars_wo.A",
        ] {
            assert_eq!(
                field_path(secret),
                AttributePath::root(),
                "{secret}: its source lines hold the values"
            );
        }
        assert_eq!(field_path("memory_mb"), AttributePath::new("memory_mb"));
    }
}
