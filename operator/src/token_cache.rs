//! Recently verified bearer tokens, so a client that sends the same token
//! on every request (every keep-alive client) is not re-verified each time:
//! verification (base64, JSON, HMAC or RSA) was a fifth of the operator's
//! instructions per proxied request (callgrind, docs/performance.md).
//!
//! Safe by construction: an entry is keyed by the whole token text (a
//! different token, however similar, misses), is only made after a full
//! verification succeeded, is never used at or past the token's `exp`, and
//! is never used after the key set changed (the JWKS was reloaded: an entry
//! remembers the key-set *epoch* it was verified under). The map is bounded:
//! when full, expired entries go, and if that is not enough, all of them.

use crate::auth::Principal;
use std::collections::HashMap;
use std::sync::Mutex;

/// Most tokens remembered at once.
pub const CAPACITY: usize = 4096;
/// Longer tokens are never remembered (they are verified every time).
pub const MAX_TOKEN_LEN: usize = 8192;

struct Entry {
    principal: Principal,
    exp: u64,
    epoch: u64,
}

/// Verified tokens (see the module docs).
pub struct TokenCache {
    map: Mutex<HashMap<String, Entry>>,
    capacity: usize,
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl TokenCache {
    /// A cache of at most `capacity` tokens.
    pub fn with_capacity(capacity: usize) -> TokenCache {
        TokenCache {
            map: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The caller of `token` if it was verified under key-set `epoch` and
    /// `now` (Unix seconds) is before its `exp`.
    pub fn get(&self, token: &str, now: u64, epoch: u64) -> Option<Principal> {
        let mut map = self.lock();
        let e = map.get(token)?;
        if e.epoch == epoch && now < e.exp {
            return Some(e.principal.clone());
        }
        map.remove(token);
        None
    }

    /// Remembers a token that just verified (expiring at `exp`).
    pub fn put(&self, token: &str, principal: &Principal, exp: u64, now: u64, epoch: u64) {
        if token.len() > MAX_TOKEN_LEN || now >= exp {
            return;
        }
        let mut map = self.lock();
        if map.len() >= self.capacity && !map.contains_key(token) {
            map.retain(|_, e| e.epoch == epoch && now < e.exp);
            if map.len() >= self.capacity {
                map.clear();
            }
        }
        map.insert(
            token.to_string(),
            Entry {
                principal: principal.clone(),
                exp,
                epoch,
            },
        );
    }

    /// Tokens remembered now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(sub: &str) -> Principal {
        Principal {
            sub: sub.to_string(),
            namespace: sless_wire::namespace_for_sub(sub),
        }
    }

    #[test]
    fn a_token_is_remembered_until_its_exp() {
        let c = TokenCache::default();
        c.put("tok", &who("alice"), 100, 10, 0);
        assert_eq!(c.get("tok", 99, 0), Some(who("alice")));
        assert_eq!(c.get("tok", 100, 0), None, "at exp it is no longer valid");
        assert_eq!(c.get("tok", 50, 0), None, "an expired entry is dropped");
        assert!(c.is_empty());
    }

    #[test]
    fn only_the_exact_token_matches() {
        let c = TokenCache::default();
        c.put("header.claims.sig", &who("alice"), 100, 10, 0);
        assert_eq!(c.get("header.claims.sig2", 20, 0), None);
        assert_eq!(c.get("header.claims.si", 20, 0), None);
        assert_eq!(c.get("HEADER.claims.sig", 20, 0), None);
    }

    #[test]
    fn a_new_key_set_epoch_forgets_earlier_verifications() {
        let c = TokenCache::default();
        c.put("tok", &who("alice"), 100, 10, 3);
        assert_eq!(c.get("tok", 20, 4), None);
        assert_eq!(c.get("tok", 20, 3), None, "dropped on the miss");
    }

    #[test]
    fn expired_or_oversized_tokens_are_not_remembered() {
        let c = TokenCache::default();
        c.put("tok", &who("alice"), 10, 10, 0);
        assert!(c.is_empty());
        let long = "x".repeat(MAX_TOKEN_LEN + 1);
        c.put(&long, &who("alice"), 100, 10, 0);
        assert!(c.is_empty());
    }

    #[test]
    fn the_map_stays_bounded() {
        let c = TokenCache::with_capacity(3);
        c.put("old", &who("a"), 15, 10, 0);
        c.put("b", &who("b"), 100, 10, 0);
        c.put("c", &who("c"), 100, 10, 0);
        // Full: the expired one goes first.
        c.put("d", &who("d"), 100, 20, 0);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get("b", 21, 0), Some(who("b")));
        // Full of live ones: cleared, then the new one kept.
        c.put("e", &who("e"), 100, 21, 0);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get("e", 22, 0), Some(who("e")));
    }
}
