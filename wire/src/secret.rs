//! Secret environment variables (`secret_env_vars`): the values travel only
//! in create and update requests; specs, stored rows, CRs and GET answers
//! carry the names and a fingerprint ([`SecretEnv`]).

use crate::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Secret values as a request carries them; `Debug` never shows them.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct SecretValues(pub BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()?;
        f.write_str(" (values redacted)")
    }
}

impl SecretValues {
    /// True when there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The secrets of a spec: names and fingerprint, and the values only in a
/// spec freshly validated from a request (never serialized).
#[derive(Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretEnv {
    /// Variable names, sorted.
    #[serde(default)]
    pub names: Vec<String>,
    /// [`secret_hash`] of the names and values.
    #[serde(default)]
    pub hash: String,
    /// The values to store, when this spec came with new ones.
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub values: Option<BTreeMap<String, String>>,
}

impl SecretEnv {
    /// The secrets `values`, with their names and fingerprint.
    pub fn from_values(values: &BTreeMap<String, String>) -> SecretEnv {
        SecretEnv {
            names: values.keys().cloned().collect(),
            hash: secret_hash(values),
            values: Some(values.clone()),
        }
    }

    /// True when there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The same names and fingerprint without the values.
    pub fn without_values(&self) -> SecretEnv {
        SecretEnv {
            names: self.names.clone(),
            hash: self.hash.clone(),
            values: None,
        }
    }
}

/// Two specs' secrets are the same when names and fingerprint are.
impl PartialEq for SecretEnv {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names && self.hash == other.hash
    }
}

impl Eq for SecretEnv {}

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretEnv")
            .field("names", &self.names)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

/// The fingerprint of a set of secrets: sha256 (hex) over a domain tag and
/// each name and value, length-prefixed; `""` for none. The provider
/// computes the same from its configuration to detect drift.
pub fn secret_hash(values: &BTreeMap<String, String>) -> String {
    if values.is_empty() {
        return String::new();
    }
    let mut h = Sha256::new();
    h.update(b"sless-secret-env-v1\0");
    for (k, v) in values {
        for part in [k.as_bytes(), v.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
    }
    hex::encode(h.finalize())
}

/// `secret_env_vars`: the rules of `env_vars` (names, count, sizes), and no
/// name also set in `env_vars`.
pub fn validate_secrets(
    secrets: &BTreeMap<String, String>,
    env_vars: &BTreeMap<String, String>,
) -> Result<(), FieldError> {
    validate::env_vars("secret_env_vars", secrets)?;
    if let Some(k) = secrets.keys().find(|k| env_vars.contains_key(*k)) {
        return Err(FieldError::invalid(
            format!("secret_env_vars.{k}"),
            format!("{k} is also set in env_vars: a variable is either plain or secret"),
        ));
    }
    Ok(())
}

/// The secrets of an update: new values when the request gives them (checked
/// against `env_vars`), else the current names and fingerprint, whose names
/// must still not collide with a new `env_vars`.
pub fn apply_secret_update(
    given: Option<&SecretValues>,
    current: &SecretEnv,
    env_vars: &BTreeMap<String, String>,
) -> Result<SecretEnv, FieldError> {
    match given {
        Some(v) => {
            validate_secrets(&v.0, env_vars)?;
            Ok(SecretEnv::from_values(&v.0))
        }
        None => {
            if let Some(k) = current.names.iter().find(|k| env_vars.contains_key(*k)) {
                return Err(FieldError::invalid(
                    format!("env_vars.{k}"),
                    format!("{k} is a secret_env_vars name: a variable is either plain or secret"),
                ));
            }
            Ok(current.without_values())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_hash_depends_on_names_and_values_and_is_empty_for_none() {
        assert_eq!(secret_hash(&BTreeMap::new()), "");
        let a = secret_hash(&m(&[("A", "1")]));
        assert_eq!(a.len(), 64);
        assert_ne!(a, secret_hash(&m(&[("A", "2")])));
        assert_ne!(a, secret_hash(&m(&[("B", "1")])));
        // Length prefixes: moving bytes between name and value changes it.
        assert_ne!(
            secret_hash(&m(&[("AB", "C")])),
            secret_hash(&m(&[("A", "BC")]))
        );
    }

    #[test]
    fn specs_serialize_names_and_hash_never_values() {
        let s = SecretEnv::from_values(&m(&[("TOKEN", "hunter2")]));
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains("TOKEN"), "{json}");
        assert!(!format!("{s:?}").contains("hunter2"));
        let req = SecretValues(m(&[("TOKEN", "hunter2")]));
        assert!(!format!("{req:?}").contains("hunter2"));
        let back: SecretEnv = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s, "equal without the values");
        assert!(back.values.is_none());
    }

    #[test]
    fn validation_names_the_field() {
        let plain = m(&[("A", "1")]);
        let e = validate_secrets(&m(&[("A", "x")]), &plain).unwrap_err();
        assert_eq!(e.field, "secret_env_vars.A");
        let e = validate_secrets(&m(&[("SLESS_X", "x")]), &plain).unwrap_err();
        assert_eq!(e.field, "secret_env_vars.SLESS_X");
        let e = validate_secrets(&m(&[("1BAD", "x")]), &plain).unwrap_err();
        assert_eq!(e.field, "secret_env_vars.1BAD");
        let big = "x".repeat(crate::limits::ENV_VALUE_MAX_BYTES + 1);
        let e = validate_secrets(&m(&[("BIG", &big)]), &plain).unwrap_err();
        assert_eq!(e.field, "secret_env_vars.BIG");
        assert!(!e.message.contains(&big));
        assert!(validate_secrets(&m(&[("B", "x")]), &plain).is_ok());
        // An update that keeps the secrets cannot add a plain twin.
        let cur = SecretEnv::from_values(&m(&[("B", "x")]));
        let e = apply_secret_update(None, &cur, &m(&[("B", "1")])).unwrap_err();
        assert_eq!(e.field, "env_vars.B");
        let kept = apply_secret_update(None, &cur, &plain).unwrap();
        assert_eq!(kept, cur);
        assert!(kept.values.is_none());
    }
}
