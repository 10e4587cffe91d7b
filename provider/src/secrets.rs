//! Write-only secrets: `secret_env_vars_wo` with `secret_env_vars_version`,
//! on functions, jobs and services (Terraform >= 1.11).
//!
//! `secret_env_vars` is sensitive, so plans never print it, but its values
//! are in the state file like any attribute's. `secret_env_vars_wo` is a
//! write-only argument: Terraform hands its values to the provider in the
//! configuration and never stores them in a plan or in state. Since the
//! provider cannot compare them with anything stored, it sends them when
//! `secret_env_vars_version` changes (and at create), the convention of
//! write-only arguments in other providers. While the secrets are write-only
//! the state also holds no fingerprint of them: `secret_env_vars_hash` is
//! null, so a weak secret cannot be guessed from the state file either.
//!
//! Older Terraform does not know write-only attributes and would store the
//! value as an ordinary one: plan and apply refuse it there, naming the
//! version that is needed.

use crate::fields::{self, EnvMap};
use crate::provider::Shared;
use sless_wire::SecretValues;
use std::collections::HashMap;
use tf_provider::schema::{Attribute, AttributeConstraint, AttributeType};
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

/// The write-only argument.
pub const WRITE_ONLY: &str = "secret_env_vars_wo";
/// The version that says when to send [`WRITE_ONLY`] again.
pub const VERSION: &str = "secret_env_vars_version";
/// The oldest Terraform that supports write-only arguments.
pub const MIN_TERRAFORM: (u64, u64) = (1, 11);

/// The secret attributes of a resource's state or configuration.
#[derive(Debug, Clone, Copy)]
pub struct SecretFields<'a> {
    /// `secret_env_vars` (sensitive, stored in state).
    pub secrets: &'a EnvMap,
    /// `secret_env_vars_hash`.
    pub hash: &'a Value<String>,
    /// `secret_env_vars_wo` (null everywhere but in configuration).
    pub write_only: &'a EnvMap,
    /// `secret_env_vars_version`.
    pub version: &'a Value<i64>,
}

impl SecretFields<'_> {
    /// True when the object's secrets are managed write-only: a version is
    /// set and `secret_env_vars` is not (a state never holds the values).
    pub fn write_only_mode(&self) -> bool {
        !self.version.is_null() && self.secrets.is_null()
    }
}

/// `attributes` with the two write-only secret attributes added;
/// `restarts` says what a version change does ("restarts the function").
pub fn with_schema_attributes(
    restarts: &str,
    mut attributes: HashMap<String, Attribute>,
) -> HashMap<String, Attribute> {
    attributes.extend(schema_attributes(restarts));
    attributes
}

/// The two schema attributes.
fn schema_attributes(restarts: &str) -> [(String, Attribute); 2] {
    use AttributeConstraint::Optional;
    use AttributeType::{Map, Number, String};
    let write_only = Attribute {
        write_only: true,
        ..fields::sensitive_attr(
            Map(Box::new(String)),
            Optional,
            &format!(
                "Secret environment variables given write-only (Terraform >= 1.11): like `secret_env_vars`, but Terraform never stores the values in a plan or in state, and `secret_env_vars_hash` stays null. They are sent at create and whenever `secret_env_vars_version` changes (which {restarts}); changing only the values does nothing. Requires `secret_env_vars_version`; cannot be used with `secret_env_vars`. Older Terraform is refused at plan time."
            ),
        )
    };
    let version = fields::attr(
        Number,
        Optional,
        "Any number you change to send `secret_env_vars_wo` again, e.g. `1`, then `2` after rotating a secret. Required with `secret_env_vars_wo`.",
    );
    [
        (WRITE_ONLY.to_string(), write_only),
        (VERSION.to_string(), version),
    ]
}

/// Validate-time checks of a configuration: the write-only map follows the
/// `secret_env_vars` rules, is not combined with `secret_env_vars`, and
/// comes with a version.
pub fn check_config(diags: &mut Diagnostics, config: SecretFields<'_>, env: &EnvMap) {
    if config.write_only.is_null() {
        return;
    }
    if !config.secrets.is_null() {
        diags.error(
            "Conflicting secrets",
            "secret_env_vars_wo and secret_env_vars cannot both be set: keep the write-only one (its values stay out of the state file) or the other.",
            AttributePath::new(WRITE_ONLY),
        );
    }
    if config.version.is_null() {
        diags.error(
            "Missing secret_env_vars_version",
            "secret_env_vars_wo needs secret_env_vars_version: Terraform keeps no copy of write-only values, so the provider sends them at create and when the version changes. Set it to a number, e.g. 1.",
            AttributePath::new(VERSION),
        );
    }
    let mut inner = Diagnostics::default();
    fields::check_secret_env_vars(&mut inner, config.write_only, env);
    for e in inner.errors.iter_mut() {
        rename_attribute(e, WRITE_ONLY);
    }
    diags.errors.extend(inner.errors);
    diags.warnings.extend(inner.warnings);
}

/// Makes a diagnostic about `secret_env_vars` name `to` instead (the
/// field is in the summary and, for secret maps, at the start of the detail;
/// see `diag::field_path`).
fn rename_attribute(d: &mut tf_provider::Diagnostic, to: &str) {
    if let Some(tf_provider::AttributePathStep::Attribute(first)) = d.attribute.steps.first_mut()
        && first == "secret_env_vars"
    {
        *first = to.to_string().into();
    }
    d.summary = d.summary.replace("secret_env_vars", to).into();
    if d.detail.starts_with("secret_env_vars") {
        d.detail = d.detail.replacen("secret_env_vars", to, 1).into();
    }
}

/// True when `version` (`ConfigureProvider`'s `terraform_version`, e.g.
/// `1.11.4`) supports write-only arguments; an unreadable version is
/// assumed to (newer Terraform may change the format, older never sent one).
pub fn terraform_supports_write_only(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split(['.', '-']);
    let major = parts.next().and_then(|p| p.parse::<u64>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u64>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) >= MIN_TERRAFORM,
        _ => true,
    }
}

/// Refuses `secret_env_vars_wo` under a Terraform that would store it like
/// an ordinary attribute. Run at plan and at apply.
pub fn check_terraform(diags: &mut Diagnostics, shared: &Shared, config: SecretFields<'_>) {
    if config.write_only.is_null() {
        return;
    }
    if let Some(version) = shared.terraform_version()
        && !terraform_supports_write_only(&version)
    {
        let (major, minor) = MIN_TERRAFORM;
        diags.error(
            "secret_env_vars_wo needs a newer Terraform",
            format!(
                "Write-only arguments need Terraform {major}.{minor} or newer; this is Terraform {version}, which would store the values in the plan and the state. Use secret_env_vars (sensitive, but kept in state) or upgrade Terraform."
            ),
            AttributePath::new(WRITE_ONLY),
        );
    }
}

/// The value `secret_env_vars_wo` has in every plan and state: null.
pub fn planned_write_only() -> EnvMap {
    Value::Null
}

/// The secrets to send when creating the object: the write-only ones from
/// the configuration, else `secret_env_vars` from the plan.
pub fn at_create(
    diags: &mut Diagnostics,
    planned: SecretFields<'_>,
    config: SecretFields<'_>,
) -> Option<SecretValues> {
    if config.write_only.is_null() {
        fields::secrets_at_apply(diags, planned.secrets)
    } else {
        write_only_at_apply(diags, config.write_only)
    }
}

/// The secrets to send when updating the object, `None` to keep those the
/// operator has. Write-only secrets go when the version changed or when
/// they replace `secret_env_vars`; `secret_env_vars` goes when it, its
/// fingerprint (drift) or the version changed (leaving write-only mode
/// sends them, or clears the secrets).
pub fn at_update(
    diags: &mut Diagnostics,
    prior: SecretFields<'_>,
    planned: SecretFields<'_>,
    config: SecretFields<'_>,
) -> Option<Option<SecretValues>> {
    let version_changed = planned.version != prior.version;
    if !config.write_only.is_null() {
        if version_changed || !prior.secrets.is_null() || !prior.hash.is_null() {
            return write_only_at_apply(diags, config.write_only).map(Some);
        }
        return Some(None);
    }
    if version_changed || planned.secrets != prior.secrets || planned.hash != prior.hash {
        return fields::secrets_at_apply(diags, planned.secrets).map(Some);
    }
    Some(None)
}

/// Like [`fields::secrets_at_apply`], for the write-only map.
fn write_only_at_apply(diags: &mut Diagnostics, v: &EnvMap) -> Option<SecretValues> {
    let m = fields::known_env(v);
    if m.is_none() {
        diags.error_short(
            "secret_env_vars_wo is not known at apply time",
            AttributePath::new(WRITE_ONLY),
        );
    }
    m.map(SecretValues)
}

/// `secret_env_vars_hash` as state: the operator's fingerprint, or null
/// while the secrets are write-only.
pub fn hash_for_state(state: SecretFields<'_>, api: &sless_wire::SecretEnv) -> Value<String> {
    if state.write_only_mode() {
        Value::Null
    } else {
        fields::secret_hash_from_api(api)
    }
}

/// `secret_env_vars_hash` as planned: null while write-only, else the
/// fingerprint of the configured `secret_env_vars`.
pub fn planned_hash(planned: SecretFields<'_>) -> Value<String> {
    if planned.write_only_mode() {
        Value::Null
    } else {
        fields::plan_secret_hash(planned.secrets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn map(pairs: &[(&str, &str)]) -> EnvMap {
        Value::Value(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Value::Value(v.to_string())))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    struct Fields {
        secrets: EnvMap,
        hash: Value<String>,
        write_only: EnvMap,
        version: Value<i64>,
    }

    impl Fields {
        fn view(&self) -> SecretFields<'_> {
            SecretFields {
                secrets: &self.secrets,
                hash: &self.hash,
                write_only: &self.write_only,
                version: &self.version,
            }
        }
    }

    fn write_only(version: i64, pairs: &[(&str, &str)]) -> Fields {
        Fields {
            secrets: Value::Null,
            hash: Value::Null,
            write_only: map(pairs),
            version: Value::Value(version),
        }
    }

    fn stored(version: Option<i64>) -> Fields {
        Fields {
            secrets: Value::Null,
            hash: Value::Null,
            write_only: Value::Null,
            version: version.map_or(Value::Null, Value::Value),
        }
    }

    fn sent(v: Option<Option<SecretValues>>) -> Option<BTreeMap<String, String>> {
        v.expect("no error").map(|s| s.0)
    }

    #[test]
    fn versions_before_1_11_cannot_take_write_only_arguments() {
        for old in ["1.0.3", "1.10.5", "0.15.0", "v1.10.0"] {
            assert!(!terraform_supports_write_only(old), "{old}");
        }
        for new in ["1.11.0", "1.11.4", "1.12.0-alpha1", "2.0.0", "", "dev"] {
            assert!(terraform_supports_write_only(new), "{new}");
        }
    }

    #[test]
    fn write_only_values_go_at_a_version_change_and_only_then() {
        let mut d = Diagnostics::default();
        let prior = stored(Some(1));
        let same = write_only(1, &[("TOKEN", "new")]);
        assert_eq!(
            sent(at_update(&mut d, prior.view(), same.view(), same.view())),
            None,
            "changing only the values sends nothing"
        );
        let bumped = write_only(2, &[("TOKEN", "new")]);
        assert_eq!(
            sent(at_update(
                &mut d,
                prior.view(),
                bumped.view(),
                bumped.view()
            )),
            Some(BTreeMap::from([("TOKEN".into(), "new".into())]))
        );
        assert!(d.errors.is_empty());
    }

    #[test]
    fn moving_to_write_only_sends_the_values_and_leaving_it_clears_them() {
        let mut d = Diagnostics::default();
        let plain = Fields {
            secrets: map(&[("TOKEN", "old")]),
            hash: Value::Value("h".into()),
            write_only: Value::Null,
            version: Value::Null,
        };
        // Same version number as before is possible after an import.
        let wo = write_only(1, &[("TOKEN", "new")]);
        let imported = Fields {
            version: Value::Value(1),
            ..stored(None)
        };
        let imported = Fields {
            hash: Value::Value("h".into()),
            ..imported
        };
        for prior in [&plain, &imported] {
            assert_eq!(
                sent(at_update(&mut d, prior.view(), wo.view(), wo.view())),
                Some(BTreeMap::from([("TOKEN".into(), "new".into())]))
            );
        }
        // Both removed: the version goes from 1 to null and the secrets are cleared.
        let none = stored(None);
        assert_eq!(
            sent(at_update(
                &mut d,
                stored(Some(1)).view(),
                none.view(),
                none.view()
            )),
            Some(BTreeMap::new())
        );
        assert!(d.errors.is_empty());
    }

    #[test]
    fn write_only_mode_keeps_no_fingerprint_in_state() {
        let api = sless_wire::SecretEnv {
            names: vec!["TOKEN".into()],
            hash: "abc".into(),
            ..Default::default()
        };
        assert_eq!(hash_for_state(stored(Some(3)).view(), &api), Value::Null);
        assert_eq!(
            planned_hash(write_only(3, &[("A", "b")]).view()),
            Value::Null
        );
        assert_eq!(
            hash_for_state(stored(None).view(), &api),
            Value::Value("abc".into())
        );
    }

    #[test]
    fn a_configuration_needs_a_version_and_not_both_maps() {
        let mut d = Diagnostics::default();
        let both = Fields {
            secrets: map(&[("A", "1")]),
            hash: Value::Null,
            write_only: map(&[("B", "2")]),
            version: Value::Null,
        };
        check_config(&mut d, both.view(), &Value::Null);
        let paths: Vec<String> = d
            .errors
            .iter()
            .map(|e| format!("{:?}", e.attribute))
            .collect();
        assert_eq!(d.errors.len(), 2, "{paths:?}");
        assert!(paths[0].contains(WRITE_ONLY), "{paths:?}");
        assert!(paths[1].contains(VERSION), "{paths:?}");

        let mut d = Diagnostics::default();
        let bad_name = write_only(1, &[("SLESS_X", "v")]);
        check_config(&mut d, bad_name.view(), &Value::Null);
        assert_eq!(d.errors.len(), 1);
        let e = &d.errors[0];
        assert_eq!(e.summary, "Invalid secret_env_vars_wo");
        assert!(
            e.detail.starts_with("secret_env_vars_wo.SLESS_X: "),
            "{}",
            e.detail
        );
    }
}
