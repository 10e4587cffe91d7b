//! The tenancy rule: a user's namespace is derived from their token's `sub`.

use sha2::{Digest, Sha256};

/// Prefix of every user namespace.
pub const NAMESPACE_PREFIX: &str = "sless-";

/// Derives a user's namespace from the JWT `sub` claim:
/// `sless-` followed by the first 8 hex characters of sha256(sub).
///
/// ```
/// assert_eq!(sless_wire::namespace_for_sub("alice"), "sless-2bd806c9");
/// ```
pub fn namespace_for_sub(sub: &str) -> String {
    let digest = Sha256::digest(sub.as_bytes());
    let hex = hex::encode(digest);
    format!("{NAMESPACE_PREFIX}{}", &hex[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_sub_gives_fixed_namespace() {
        // sha256("alice") = 2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90
        assert_eq!(namespace_for_sub("alice"), "sless-2bd806c9");
        assert_eq!(namespace_for_sub("alice"), namespace_for_sub("alice"));
        assert_ne!(namespace_for_sub("alice"), namespace_for_sub("bob"));
    }

    #[test]
    fn namespace_is_a_dns_label() {
        let ns = namespace_for_sub("user@example.com");
        assert_eq!(ns.len(), NAMESPACE_PREFIX.len() + 8);
        assert!(crate::validate::name("namespace", &ns).is_ok());
    }
}
