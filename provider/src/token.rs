//! Reading the `sub` claim of the user's JWT. The signature is not verified
//! here: the operator verifies every token; the provider only needs `sub` to
//! derive the namespace.

use base64::Engine;

/// Why a token's `sub` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is empty.
    #[error("the token is empty: set `token` in the provider block or SLESS_TOKEN")]
    Empty,
    /// Not three dot-separated parts.
    #[error(
        "the token is not a JWT (expected three base64url parts separated by '.', found {parts}): check that SLESS_TOKEN holds the token itself, without a 'Bearer ' prefix or quotes"
    )]
    NotAJwt {
        /// How many parts it had.
        parts: usize,
    },
    /// The payload is not base64url.
    #[error(
        "the token's payload is not valid base64url ({0}): the token is malformed or was truncated when copied"
    )]
    Base64(String),
    /// The payload is not a JSON object.
    #[error("the token's payload is not a JSON object ({0}): the token is malformed")]
    Json(String),
    /// No `sub` claim, or an empty or non-string one.
    #[error(
        "the token has no `sub` claim (or it is empty or not a string): sless derives your namespace from `sub`, so use a user token issued by Nubes, not a service token"
    )]
    NoSub,
}

/// Returns the `sub` claim of a JWT without verifying it.
pub fn sub_of(token: &str) -> Result<String, TokenError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 || parts.iter().take(2).any(|p| p.is_empty()) {
        return Err(TokenError::NotAJwt { parts: parts.len() });
    }
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(parts[1].trim_end_matches('='))
        .map_err(|e| TokenError::Base64(e.to_string()))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| TokenError::Json(e.to_string()))?;
    let Some(obj) = claims.as_object() else {
        return Err(TokenError::Json("not an object".into()));
    };
    match obj.get("sub").and_then(|s| s.as_str()) {
        Some(sub) if !sub.is_empty() => Ok(sub.to_string()),
        _ => Err(TokenError::NoSub),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(payload: &str) -> String {
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.{}",
            e.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
            e.encode(payload),
            e.encode("signature-not-checked")
        )
    }

    #[test]
    fn sub_is_decoded_and_gives_the_fixed_namespace() {
        let t = jwt(r#"{"sub":"alice","exp":4102444800}"#);
        let sub = sub_of(&t).unwrap();
        assert_eq!(sub, "alice");
        assert_eq!(sless_wire::namespace_for_sub(&sub), "sless-2bd806c9");
    }

    #[test]
    fn base64url_specific_characters_decode() {
        // '?' and '>' encode to '_' and '-' in base64url.
        let t = jwt(r#"{"sub":"a??>>b"}"#);
        assert_eq!(sub_of(&t).unwrap(), "a??>>b");
    }

    #[test]
    fn malformed_tokens_say_what_is_wrong() {
        assert_eq!(sub_of("  "), Err(TokenError::Empty));
        assert_eq!(sub_of("abc"), Err(TokenError::NotAJwt { parts: 1 }));
        assert!(matches!(sub_of("a.%%%.c"), Err(TokenError::Base64(_))));
        let not_json = format!(
            "x.{}.y",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("hello")
        );
        assert!(matches!(sub_of(&not_json), Err(TokenError::Json(_))));
        assert_eq!(sub_of(&jwt(r#"{"iss":"nubes"}"#)), Err(TokenError::NoSub));
        assert_eq!(sub_of(&jwt(r#"{"sub":""}"#)), Err(TokenError::NoSub));
        assert_eq!(sub_of(&jwt(r#"{"sub":42}"#)), Err(TokenError::NoSub));
    }
}
