//! Token verification and minting.
//!
//! Two kinds of tokens are accepted:
//! - **local** HS256 tokens signed with a random secret the operator keeps in
//!   `<data-dir>/jwt-hs256.key` (embedded mode; `sless-operator token` mints
//!   them). Accepted when no JWKS is configured, or with `--allow-local-tokens`.
//! - **JWKS** tokens (RS256, ES256, EdDSA with Ed25519) signed by an identity
//!   provider whose public keys come from a JWKS file or URL, selected by `kid`
//!   (a JWKS *file* is also how to trust a local Ed25519 key). `iss` and `aud` are
//!   checked when configured.
//!
//! Every token needs a valid signature, an unexpired `exp` and a non-empty
//! `sub`; `nbf` is honoured. Tokens are never logged.

use crate::config::AuthArgs;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Mutex, RwLock};

/// File name of the local HS256 secret inside the data dir.
pub const LOCAL_KEY_FILE: &str = "jwt-hs256.key";
/// `iss` of tokens minted by `sless-operator token`.
pub const LOCAL_ISSUER: &str = "sless-operator-local";
/// Length of the local HS256 secret in bytes.
pub const LOCAL_KEY_LEN: usize = 32;
/// Allowed clock skew for `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;
/// Shortest time between two JWKS reloads triggered by unknown key ids.
pub const JWKS_REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(30);

/// Why the auth machinery could not be set up (a configuration or disk fault).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Reading or writing the local key (or the JWKS file) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The local key file exists but does not hold a key.
    #[error(
        "{path}: expected {LOCAL_KEY_LEN} bytes of key, found {len}; delete the file to generate a new key (tokens minted before stop working)"
    )]
    BadLocalKey {
        /// The key file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
    /// The system random generator failed.
    #[error("cannot generate a random key: {0}")]
    Random(String),
    /// The JWKS could not be read or parsed.
    #[error("JWKS from {source_name}: {message}")]
    Jwks {
        /// The file or URL.
        source_name: String,
        /// What went wrong.
        message: String,
    },
    /// Signing a token failed.
    #[error("cannot sign the token: {0}")]
    Sign(String),
}

/// Why a request was not authenticated (401). The messages say which check
/// failed, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("missing bearer token: send the header `Authorization: Bearer <token>`")]
    MissingToken,
    /// An `Authorization` header with another scheme.
    #[error("the Authorization header must use the Bearer scheme")]
    WrongScheme,
    /// Not a JWT.
    #[error("malformed token: {0}")]
    Malformed(String),
    /// `alg: none`.
    #[error("unsigned tokens (alg none) are not accepted")]
    Unsigned,
    /// An algorithm other than HS256, RS256, ES256, EdDSA.
    #[error(
        "token algorithm {0} is not accepted: use HS256 (local tokens), RS256, ES256 or EdDSA (JWKS)"
    )]
    UnsupportedAlg(String),
    /// An HS256 token while local tokens are off.
    #[error(
        "local HS256 tokens are not accepted because a JWKS is configured (start the operator with --allow-local-tokens to accept them)"
    )]
    LocalTokensDisabled,
    /// An RS256/ES256/EdDSA token while no JWKS is configured.
    #[error("{0} tokens need a JWKS: start the operator with --jwks-file or --jwks-url")]
    NoJwks(String),
    /// The token's `kid` is not in the JWKS.
    #[error("the token's key id {0:?} is not in the JWKS")]
    UnknownKey(String),
    /// No `kid` and not exactly one key to choose from.
    #[error("the token has no key id (kid) and the JWKS has {0} keys for its algorithm")]
    AmbiguousKey(usize),
    /// The JWKS could not be loaded, so no JWKS token can be verified.
    #[error("cannot verify the token: the JWKS is unavailable ({0})")]
    JwksUnavailable(String),
    /// The signature does not verify (wrong key or tampered token).
    #[error("invalid token signature")]
    BadSignature,
    /// The key in the JWKS does not fit the token's algorithm.
    #[error("the token's algorithm does not match its key")]
    AlgorithmMismatch,
    /// `exp` is in the past.
    #[error("token expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("token not valid yet (nbf is in the future)")]
    NotYetValid,
    /// `iss` differs from `--issuer`.
    #[error("token issuer (iss) is not the expected issuer")]
    WrongIssuer,
    /// `aud` does not include `--audience`.
    #[error("token audience (aud) does not include the expected audience")]
    WrongAudience,
    /// A required claim (`exp`, `iss`, `aud`) is absent.
    #[error("token lacks the required claim {0}")]
    MissingClaim(String),
    /// A claim of the wrong type.
    #[error("token claim {0} has an invalid format")]
    InvalidClaim(String),
    /// `sub` absent, empty or not a string.
    #[error("token has no subject: the sub claim must be a non-empty string")]
    MissingSub,
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `sub`.
    pub sub: String,
    /// The caller's namespace, derived from `sub`.
    pub namespace: String,
}

/// The local HS256 secret of embedded mode.
#[derive(Clone)]
pub struct LocalKey {
    secret: [u8; LOCAL_KEY_LEN],
}

impl std::fmt::Debug for LocalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalKey(..)")
    }
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SetupError {
    let context = context.into();
    move |source| SetupError::Io { context, source }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl LocalKey {
    /// Reads `<data_dir>/jwt-hs256.key`, generating it (mode 0600, atomically,
    /// never replacing a key another process wrote first) when missing.
    pub fn load_or_create(data_dir: &Path) -> Result<LocalKey, SetupError> {
        let path = data_dir.join(LOCAL_KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => return Self::from_bytes(&path, &bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(format!("reading {}", path.display()))(e)),
        }
        std::fs::create_dir_all(data_dir)
            .map_err(io_err(format!("creating {}", data_dir.display())))?;
        let mut secret = [0u8; LOCAL_KEY_LEN];
        getrandom::fill(&mut secret).map_err(|e| SetupError::Random(e.to_string()))?;
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|e| SetupError::Random(e.to_string()))?;
        let tmp = data_dir.join(format!(
            ".{LOCAL_KEY_FILE}.{}.{}.tmp",
            std::process::id(),
            hex::encode(suffix)
        ));
        let write = || -> std::io::Result<()> {
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                opts.mode(0o600);
            }
            let mut f = opts.open(&tmp)?;
            f.write_all(&secret)?;
            f.sync_all()?;
            // A hard link publishes the complete file under its final name and
            // fails if another process got there first: no key is ever replaced.
            match std::fs::hard_link(&tmp, &path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(e),
            }
        };
        let result = write();
        let _ = std::fs::remove_file(&tmp);
        result.map_err(io_err(format!("writing {}", path.display())))?;
        let bytes = std::fs::read(&path).map_err(io_err(format!("reading {}", path.display())))?;
        Self::from_bytes(&path, &bytes)
    }

    fn from_bytes(path: &Path, bytes: &[u8]) -> Result<LocalKey, SetupError> {
        let secret: [u8; LOCAL_KEY_LEN] =
            bytes.try_into().map_err(|_| SetupError::BadLocalKey {
                path: path.to_path_buf(),
                len: bytes.len(),
            })?;
        Ok(LocalKey { secret })
    }

    /// Signs an HS256 token for `sub`, valid for `ttl`.
    pub fn mint(&self, sub: &str, ttl: Duration) -> Result<String, SetupError> {
        let now = now_secs();
        let claims = serde_json::json!({
            "sub": sub,
            "iss": LOCAL_ISSUER,
            "iat": now,
            "exp": now.saturating_add(ttl.as_secs().max(1)),
        });
        let key =
            EncodingKey::from_secret(&self.secret).map_err(|e| SetupError::Sign(e.to_string()))?;
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
            .map_err(|e| SetupError::Sign(e.to_string()))
    }

    fn decoding_key(&self) -> Result<DecodingKey, SetupError> {
        DecodingKey::from_secret(&self.secret).map_err(|e| SetupError::Sign(e.to_string()))
    }
}

/// Where JWKS keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A JSON file on disk.
    File(PathBuf),
    /// An HTTP(S) URL.
    Url(String),
}

impl JwksSource {
    fn name(&self) -> String {
        match self {
            JwksSource::File(p) => p.display().to_string(),
            JwksSource::Url(u) => u.clone(),
        }
    }
}

/// A JWKS with reloading on unknown key ids, rate-limited.
struct Jwks {
    source: JwksSource,
    http: reqwest::Client,
    keys: RwLock<Option<JwkSet>>,
    last_load: Mutex<Option<Instant>>,
    /// Bumped on every load: verifications made under an earlier key set
    /// are not reused (see [`crate::token_cache`]).
    epoch: std::sync::atomic::AtomicU64,
}

impl Jwks {
    async fn fetch(&self) -> Result<JwkSet, SetupError> {
        let err = |message: String| SetupError::Jwks {
            source_name: self.source.name(),
            message,
        };
        let text = match &self.source {
            JwksSource::File(path) => tokio::fs::read_to_string(path)
                .await
                .map_err(|e| err(e.to_string()))?,
            JwksSource::Url(url) => {
                let resp = self
                    .http
                    .get(url)
                    .send()
                    .await
                    .map_err(|e| err(e.to_string()))?;
                if !resp.status().is_success() {
                    return Err(err(format!("HTTP status {}", resp.status())));
                }
                resp.text().await.map_err(|e| err(e.to_string()))?
            }
        };
        let set: JwkSet =
            serde_json::from_str(&text).map_err(|e| err(format!("not a JWKS: {e}")))?;
        if set.keys.is_empty() {
            return Err(err("the JWKS has no keys".to_string()));
        }
        Ok(set)
    }

    /// Reloads the keys. Unless `force`, at most once per
    /// [`JWKS_REFRESH_MIN_INTERVAL`]. Returns whether a load happened.
    async fn reload(&self, force: bool) -> Result<bool, SetupError> {
        let mut last = self.last_load.lock().await;
        if !force {
            // Reloads caused by tokens are rate-limited; the startup load is not
            // counted, so a key rotated in right after startup is found at once.
            if last.is_some_and(|t| t.elapsed() < JWKS_REFRESH_MIN_INTERVAL) {
                return Ok(false);
            }
            *last = Some(Instant::now());
        }
        let set = self.fetch().await?;
        tracing::info!(source = %self.source.name(), keys = set.keys.len(), "loaded JWKS");
        *self.keys.write().await = Some(set);
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(true)
    }

    fn pick(set: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Result<Jwk, AuthError> {
        match kid {
            Some(kid) => set
                .find(kid)
                .cloned()
                .ok_or_else(|| AuthError::UnknownKey(kid.to_string())),
            None => {
                let fits: Vec<&Jwk> = set.keys.iter().filter(|k| key_fits(k, alg)).collect();
                match fits.as_slice() {
                    [one] => Ok((*one).clone()),
                    other => Err(AuthError::AmbiguousKey(other.len())),
                }
            }
        }
    }

    /// The key for a token, reloading once when the kid is unknown.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Jwk, AuthError> {
        let first = {
            let keys = self.keys.read().await;
            keys.as_ref().map(|set| Self::pick(set, kid, alg))
        };
        match first {
            Some(Ok(jwk)) => return Ok(jwk),
            Some(Err(e)) if kid.is_none() => return Err(e),
            _ => {}
        }
        let had_keys = first.is_some();
        match self.reload(false).await {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "JWKS reload failed");
                if !had_keys {
                    return Err(AuthError::JwksUnavailable(e.to_string()));
                }
            }
        }
        let keys = self.keys.read().await;
        match keys.as_ref() {
            Some(set) => Self::pick(set, kid, alg),
            None => Err(AuthError::JwksUnavailable("no keys loaded".to_string())),
        }
    }
}

/// Whether a JWK can verify tokens of `alg`.
fn key_fits(jwk: &Jwk, alg: Algorithm) -> bool {
    use jsonwebtoken::jwk::AlgorithmParameters as P;
    use jsonwebtoken::jwk::EllipticCurve as C;
    let family_ok = match (&jwk.algorithm, alg) {
        (P::RSA(_), Algorithm::RS256) => true,
        (P::EllipticCurve(ec), Algorithm::ES256) => ec.curve == C::P256,
        (P::OctetKeyPair(okp), Algorithm::EdDSA) => okp.curve == C::Ed25519,
        _ => false,
    };
    let alg_ok = jwk
        .common
        .key_algorithm
        .is_none_or(|ka| ka.to_string() == format!("{alg:?}"));
    family_ok && alg_ok
}

/// Refuses a JWKS key whose size its algorithm cannot use. jsonwebtoken
/// slices an Ed25519 key to its first 32 bytes without checking its length,
/// so a shorter `x` would panic while verifying (found by the `jwks_documents`
/// fuzz harness, operator/tests/fuzz.rs) and a longer one would be silently
/// cut; an Ed25519 public key is exactly 32 bytes.
fn check_key_size(key: &DecodingKey, alg: Algorithm) -> Result<(), AuthError> {
    const ED25519_KEY_BYTES: usize = 32;
    if alg != Algorithm::EdDSA {
        return Ok(());
    }
    match key.try_get_as_bytes() {
        Ok(bytes) if bytes.len() == ED25519_KEY_BYTES => Ok(()),
        Ok(bytes) => Err(AuthError::JwksUnavailable(format!(
            "bad key in JWKS: an Ed25519 key (x) must be {ED25519_KEY_BYTES} bytes, this one has {}",
            bytes.len()
        ))),
        Err(e) => Err(AuthError::JwksUnavailable(format!("bad key in JWKS: {e}"))),
    }
}

/// Verifies bearer tokens. Built once at startup and shared by all requests.
pub struct Verifier {
    local: Option<DecodingKey>,
    jwks: Option<Jwks>,
    issuer: Option<String>,
    audience: Option<String>,
    /// Tokens that verified recently.
    cache: crate::token_cache::TokenCache,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("local_tokens", &self.local.is_some())
            .field("jwks", &self.jwks.as_ref().map(|j| j.source.name()))
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish()
    }
}

impl Verifier {
    /// Builds the verifier from the `serve` options. A JWKS file must load; a
    /// JWKS URL that fails at startup is retried when tokens arrive.
    pub async fn from_args(args: &AuthArgs, data_dir: &Path) -> Result<Verifier, SetupError> {
        let source = match (&args.jwks_file, &args.jwks_url) {
            (Some(f), _) => Some(JwksSource::File(f.clone())),
            (None, Some(u)) => Some(JwksSource::Url(u.clone())),
            (None, None) => None,
        };
        let local = if source.is_none() || args.allow_local_tokens {
            Some(LocalKey::load_or_create(data_dir)?)
        } else {
            None
        };
        Self::new(local, source, args.issuer.clone(), args.audience.clone()).await
    }

    /// Builds a verifier from its parts (tests and embedders).
    pub async fn new(
        local: Option<LocalKey>,
        jwks: Option<JwksSource>,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> Result<Verifier, SetupError> {
        let local = local.map(|k| k.decoding_key()).transpose()?;
        let jwks = match jwks {
            None => None,
            Some(source) => {
                let http = reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .map_err(|e| SetupError::Jwks {
                        source_name: source.name(),
                        message: e.to_string(),
                    })?;
                let jwks = Jwks {
                    source,
                    http,
                    keys: RwLock::new(None),
                    last_load: Mutex::new(None),
                    epoch: Default::default(),
                };
                match jwks.reload(true).await {
                    Ok(_) => {}
                    Err(e) if matches!(jwks.source, JwksSource::File(_)) => return Err(e),
                    Err(e) => {
                        tracing::warn!(error = %e, "JWKS not loaded at startup; retrying when tokens arrive")
                    }
                }
                Some(jwks)
            }
        };
        Ok(Verifier {
            local,
            jwks,
            issuer,
            audience,
            cache: Default::default(),
        })
    }

    /// Whether local HS256 tokens are accepted.
    pub fn accepts_local_tokens(&self) -> bool {
        self.local.is_some()
    }

    /// Verifies the value of an `Authorization` header (None when absent).
    pub async fn verify_header(&self, header: Option<&str>) -> Result<Principal, AuthError> {
        let header = header.ok_or(AuthError::MissingToken)?.trim();
        let (scheme, token) = header.split_once(' ').unwrap_or((header, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::WrongScheme);
        }
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthError::Malformed(
                "the bearer token is empty".to_string(),
            ));
        }
        self.verify(token).await
    }

    /// Verifies a compact JWT and returns the caller (from the cache of
    /// recently verified tokens when it is there and still valid).
    pub async fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let epoch = self.key_epoch();
        let now = now_secs();
        if let Some(p) = self.cache.get(token, now, epoch) {
            return Ok(p);
        }
        let (principal, exp) = self.verify_fully(token).await?;
        if let Some(exp) = exp {
            self.cache.put(token, &principal, exp, now, epoch);
        }
        Ok(principal)
    }

    /// The JWKS key set's load count (0 without a JWKS).
    fn key_epoch(&self) -> u64 {
        self.jwks
            .as_ref()
            .map_or(0, |j| j.epoch.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Verifies a compact JWT: the caller, and its `exp` when it has one.
    async fn verify_fully(&self, token: &str) -> Result<(Principal, Option<u64>), AuthError> {
        let alg = peek_alg(token)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthError::Malformed(format!("bad header: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        let key = match header.alg {
            Algorithm::HS256 => self.local.clone().ok_or(AuthError::LocalTokensDisabled)?,
            Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA => {
                let jwks = self
                    .jwks
                    .as_ref()
                    .ok_or_else(|| AuthError::NoJwks(alg.clone()))?;
                let jwk = jwks.key_for(header.kid.as_deref(), header.alg).await?;
                if !key_fits(&jwk, header.alg) {
                    return Err(AuthError::AlgorithmMismatch);
                }
                let mut required = vec!["exp"];
                if let Some(iss) = &self.issuer {
                    validation.set_issuer(&[iss]);
                    required.push("iss");
                }
                if let Some(aud) = &self.audience {
                    validation.set_audience(&[aud]);
                    validation.validate_aud = true;
                    required.push("aud");
                }
                validation.set_required_spec_claims(&required);
                let key = DecodingKey::from_jwk(&jwk)
                    .map_err(|e| AuthError::JwksUnavailable(format!("bad key in JWKS: {e}")))?;
                check_key_size(&key, header.alg)?;
                key
            }
            _ => return Err(AuthError::UnsupportedAlg(alg)),
        };
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token,
            &key,
            &validation,
        )
        .map_err(map_jwt_error)?;
        let sub = match data.claims.get("sub") {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => return Err(AuthError::MissingSub),
        };
        let exp = data.claims.get("exp").and_then(serde_json::Value::as_u64);
        Ok((
            Principal {
                namespace: sless_wire::namespace_for_sub(&sub),
                sub,
            },
            exp,
        ))
    }
}

/// Reads the `alg` of a token's header without trusting anything else, so
/// that `alg: none` and unknown algorithms get a precise answer.
fn peek_alg(token: &str) -> Result<String, AuthError> {
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(AuthError::Malformed(format!(
            "a JWT has 3 dot-separated parts, this has {}",
            parts.len()
        )));
    }
    let raw = URL_SAFE_NO_PAD
        .decode(parts[0].trim_end_matches('='))
        .map_err(|_| AuthError::Malformed("the header is not base64url".to_string()))?;
    let header: serde_json::Value = serde_json::from_slice(&raw)
        .map_err(|_| AuthError::Malformed("the header is not JSON".to_string()))?;
    let alg = header
        .get("alg")
        .and_then(|a| a.as_str())
        .ok_or_else(|| AuthError::Malformed("the header has no alg".to_string()))?;
    if alg.eq_ignore_ascii_case("none") {
        return Err(AuthError::Unsigned);
    }
    match alg {
        "HS256" | "RS256" | "ES256" | "EdDSA" => Ok(alg.to_string()),
        other => Err(AuthError::UnsupportedAlg(other.chars().take(32).collect())),
    }
}

fn map_jwt_error(e: jsonwebtoken::errors::Error) -> AuthError {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.into_kind() {
        K::InvalidSignature => AuthError::BadSignature,
        K::ExpiredSignature => AuthError::Expired,
        K::ImmatureSignature => AuthError::NotYetValid,
        K::InvalidIssuer => AuthError::WrongIssuer,
        K::InvalidAudience => AuthError::WrongAudience,
        K::MissingRequiredClaim(c) => AuthError::MissingClaim(c),
        K::InvalidClaimFormat(c) => AuthError::InvalidClaim(c),
        K::InvalidAlgorithm | K::InvalidEcdsaKey | K::InvalidRsaKey(_) => {
            AuthError::AlgorithmMismatch
        }
        K::Base64(_) => AuthError::Malformed("a part is not base64url".to_string()),
        K::Json(_) | K::Utf8(_) => {
            AuthError::Malformed("the claims are not a JSON object".to_string())
        }
        other => AuthError::Malformed(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(v: &serde_json::Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    async fn local_verifier(dir: &Path) -> (LocalKey, Verifier) {
        let key = LocalKey::load_or_create(dir).unwrap();
        let v = Verifier::new(Some(key.clone()), None, None, None)
            .await
            .unwrap();
        (key, v)
    }

    fn sign_hs(secret: &[u8], claims: serde_json::Value) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret).unwrap(),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn minted_token_verifies_and_names_the_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let (key, v) = local_verifier(dir.path()).await;
        let token = key.mint("alice", Duration::from_secs(60)).unwrap();
        let p = v.verify(&token).await.unwrap();
        assert_eq!(p.sub, "alice");
        assert_eq!(p.namespace, "sless-2bd806c9");
        let p = v
            .verify_header(Some(&format!("bearer {token}")))
            .await
            .unwrap();
        assert_eq!(p.sub, "alice");
    }

    #[tokio::test]
    async fn a_remembered_token_lets_no_altered_copy_through() {
        let dir = tempfile::tempdir().unwrap();
        let (key, v) = local_verifier(dir.path()).await;
        let token = key.mint("alice", Duration::from_secs(60)).unwrap();
        assert_eq!(v.verify(&token).await.unwrap().sub, "alice");
        assert_eq!(v.cache.len(), 1, "a verified token is remembered");
        assert_eq!(v.verify(&token).await.unwrap().sub, "alice");
        // Same header and claims, another signature; and one byte off.
        let (body, _) = token.rsplit_once('.').unwrap();
        let forged = format!("{body}.{}", b64(&serde_json::json!("not-the-signature")));
        assert!(
            v.verify(&forged).await.is_err(),
            "forged signature accepted"
        );
        let mut off = token.clone().into_bytes();
        let last = off.len() - 1;
        off[last] = if off[last] == b'A' { b'B' } else { b'A' };
        let off = String::from_utf8(off).unwrap();
        assert!(v.verify(&off).await.is_err(), "altered token accepted");
        assert_eq!(v.cache.len(), 1, "failures are not remembered");
    }

    #[tokio::test]
    async fn key_is_created_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let a = LocalKey::load_or_create(dir.path()).unwrap();
        let b = LocalKey::load_or_create(dir.path()).unwrap();
        assert_eq!(a.secret, b.secret);
        let path = dir.path().join(LOCAL_KEY_FILE);
        assert_eq!(std::fs::read(&path).unwrap().len(), LOCAL_KEY_LEN);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // No temp files left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_truncated_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCAL_KEY_FILE), b"short").unwrap();
        let err = LocalKey::load_or_create(dir.path()).unwrap_err();
        assert!(matches!(err, SetupError::BadLocalKey { len: 5, .. }));
    }

    #[tokio::test]
    async fn header_problems() {
        let dir = tempfile::tempdir().unwrap();
        let (_, v) = local_verifier(dir.path()).await;
        assert_eq!(v.verify_header(None).await, Err(AuthError::MissingToken));
        assert_eq!(
            v.verify_header(Some("Basic dXNlcjpwdw==")).await,
            Err(AuthError::WrongScheme)
        );
        assert!(matches!(
            v.verify_header(Some("Bearer ")).await,
            Err(AuthError::Malformed(_))
        ));
        assert!(matches!(
            v.verify_header(Some("Bearer not-a-jwt")).await,
            Err(AuthError::Malformed(_))
        ));
        assert!(matches!(
            v.verify_header(Some("Bearer a.b.c")).await,
            Err(AuthError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn alg_none_is_unsigned() {
        let dir = tempfile::tempdir().unwrap();
        let (_, v) = local_verifier(dir.path()).await;
        let exp = now_secs() + 600;
        let token = format!(
            "{}.{}.",
            b64(&serde_json::json!({"alg": "none", "typ": "JWT"})),
            b64(&serde_json::json!({"sub": "alice", "exp": exp}))
        );
        assert_eq!(v.verify(&token).await, Err(AuthError::Unsigned));
    }

    #[tokio::test]
    async fn expired_wrong_key_and_missing_sub() {
        let dir = tempfile::tempdir().unwrap();
        let (key, v) = local_verifier(dir.path()).await;
        let now = now_secs();
        let expired = sign_hs(
            &key.secret,
            serde_json::json!({"sub": "a", "exp": now - 3600}),
        );
        assert_eq!(v.verify(&expired).await, Err(AuthError::Expired));
        let other = sign_hs(
            &[7u8; 32],
            serde_json::json!({"sub": "a", "exp": now + 600}),
        );
        assert_eq!(v.verify(&other).await, Err(AuthError::BadSignature));
        let no_sub = sign_hs(&key.secret, serde_json::json!({"exp": now + 600}));
        assert_eq!(v.verify(&no_sub).await, Err(AuthError::MissingSub));
        let empty_sub = sign_hs(
            &key.secret,
            serde_json::json!({"sub": "", "exp": now + 600}),
        );
        assert_eq!(v.verify(&empty_sub).await, Err(AuthError::MissingSub));
        let no_exp = sign_hs(&key.secret, serde_json::json!({"sub": "a"}));
        assert_eq!(
            v.verify(&no_exp).await,
            Err(AuthError::MissingClaim("exp".into()))
        );
        let future = sign_hs(
            &key.secret,
            serde_json::json!({"sub": "a", "exp": now + 7200, "nbf": now + 3600}),
        );
        assert_eq!(v.verify(&future).await, Err(AuthError::NotYetValid));
    }

    #[tokio::test]
    async fn rs256_without_jwks_and_hs256_with_jwks_only() {
        let dir = tempfile::tempdir().unwrap();
        let (key, v) = local_verifier(dir.path()).await;
        let rs = format!(
            "{}.{}.c2ln",
            b64(&serde_json::json!({"alg": "RS256"})),
            b64(&serde_json::json!({"sub": "a", "exp": now_secs() + 60}))
        );
        assert_eq!(v.verify(&rs).await, Err(AuthError::NoJwks("RS256".into())));

        let jwks = dir.path().join("jwks.json");
        std::fs::write(
            &jwks,
            r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#,
        )
        .unwrap();
        let v = Verifier::new(None, Some(JwksSource::File(jwks)), None, None)
            .await
            .unwrap();
        let token = key.mint("a", Duration::from_secs(60)).unwrap();
        assert_eq!(v.verify(&token).await, Err(AuthError::LocalTokensDisabled));
        assert!(!v.accepts_local_tokens());
        let hs512 = format!(
            "{}.{}.c2ln",
            b64(&serde_json::json!({"alg": "HS512"})),
            b64(&serde_json::json!({"sub": "a"}))
        );
        assert_eq!(
            v.verify(&hs512).await,
            Err(AuthError::UnsupportedAlg("HS512".into()))
        );
        let es_unknown_kid = format!(
            "{}.{}.c2ln",
            b64(&serde_json::json!({"alg": "ES256", "kid": "other"})),
            b64(&serde_json::json!({"sub": "a", "exp": now_secs() + 60}))
        );
        assert_eq!(
            v.verify(&es_unknown_kid).await,
            Err(AuthError::UnknownKey("other".into()))
        );
        let es_forged = format!(
            "{}.{}.c2ln",
            b64(&serde_json::json!({"alg": "ES256", "kid": "k1"})),
            b64(&serde_json::json!({"sub": "a", "exp": now_secs() + 60}))
        );
        assert!(v.verify(&es_forged).await.is_err());
    }

    /// Regression (fuzz harness `jwks_documents`): an Ed25519 JWK whose `x`
    /// is not 32 bytes made jsonwebtoken panic (slice out of range) while
    /// verifying an EdDSA token; now the token is refused with a 401 reason.
    #[tokio::test]
    async fn an_ed25519_key_of_the_wrong_size_refuses_instead_of_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        let token = format!(
            "{}.{}.c2lnbmF0dXJl",
            b64(&serde_json::json!({"alg": "EdDSA", "kid": "k1"})),
            b64(&serde_json::json!({"sub": "a", "exp": now_secs() + 60}))
        );
        for x in [&b"short"[..], &[7u8; 31][..], &[7u8; 33][..], &[][..]] {
            let doc = serde_json::json!({"keys": [{
                "kty": "OKP", "crv": "Ed25519", "kid": "k1",
                "x": URL_SAFE_NO_PAD.encode(x),
            }]});
            std::fs::write(&jwks, doc.to_string()).unwrap();
            let v = Verifier::new(None, Some(JwksSource::File(jwks.clone())), None, None)
                .await
                .unwrap();
            let err = v.verify(&token).await.unwrap_err();
            assert!(
                matches!(&err, AuthError::JwksUnavailable(m) if m.contains("bad key in JWKS")),
                "{} bytes: {err}",
                x.len()
            );
        }
    }

    #[tokio::test]
    async fn a_broken_jwks_file_fails_startup() {
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, "{").unwrap();
        let err = Verifier::new(None, Some(JwksSource::File(jwks)), None, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not a JWKS"), "{err}");
    }
}
