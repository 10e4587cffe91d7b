//! GnuPG: choosing an RSA signing key, exporting it, signing SHA256SUMS, checking signatures.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::error::{Error, Result, io};

/// Public-key algorithm numbers (RFC 4880 §9.1) that are RSA.
const RSA_ALGOS: [u32; 2] = [1, 3];

/// A readable name for an OpenPGP public-key algorithm number.
pub fn algorithm_name(algo: u32) -> String {
    let name = match algo {
        1 => "RSA",
        2 => "RSA (encrypt only)",
        3 => "RSA (sign only)",
        16 => "Elgamal",
        17 => "DSA",
        18 => "ECDH",
        19 => "ECDSA",
        22 => "EdDSA (e.g. ed25519)",
        _ => "an unknown algorithm",
    };
    format!("{name} (algorithm {algo})")
}

/// Whether a key record is primary or a subkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `pub` record.
    Primary,
    /// `sub` record.
    Subkey,
}

/// One `pub`/`sub` record of `gpg --with-colons --list-keys`, with its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// Primary or subkey.
    pub kind: KeyKind,
    /// Validity letter (`u`, `f`, `r` revoked, `e` expired, ...).
    pub validity: char,
    /// Public-key algorithm number.
    pub algo: u32,
    /// 16-hex long key id.
    pub key_id: String,
    /// 40-hex fingerprint (empty if gpg printed none).
    pub fingerprint: String,
    /// Capability letters of this key itself (lowercase for the key's own usage).
    pub capabilities: String,
}

impl KeyRecord {
    fn usable(&self) -> bool {
        !matches!(self.validity, 'r' | 'e' | 'i' | 'd')
    }
    fn can_sign(&self) -> bool {
        self.capabilities.contains('s')
    }
    fn is_rsa(&self) -> bool {
        RSA_ALGOS.contains(&self.algo)
    }
}

/// Parses `--with-colons` key listings into keys: each a primary record followed by its subkeys.
pub fn parse_colons(text: &str) -> Vec<Vec<KeyRecord>> {
    let mut keys: Vec<Vec<KeyRecord>> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(':').collect();
        let field = |i: usize| f.get(i).copied().unwrap_or("");
        match field(0) {
            kind @ ("pub" | "sub") => {
                let rec = KeyRecord {
                    kind: if kind == "pub" {
                        KeyKind::Primary
                    } else {
                        KeyKind::Subkey
                    },
                    validity: field(1).chars().next().unwrap_or('-'),
                    algo: field(3).parse().unwrap_or(0),
                    key_id: field(4).to_ascii_uppercase(),
                    fingerprint: String::new(),
                    capabilities: field(11).to_owned(),
                };
                if kind == "pub" {
                    keys.push(vec![rec]);
                } else if let Some(k) = keys.last_mut() {
                    k.push(rec);
                }
            }
            "fpr" => {
                if let Some(rec) = keys.last_mut().and_then(|k| k.last_mut())
                    && rec.fingerprint.is_empty()
                {
                    rec.fingerprint = field(9).to_ascii_uppercase();
                }
            }
            _ => {}
        }
    }
    keys
}

/// The key chosen for signing a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKey {
    /// The key as given on the command line.
    pub requested: String,
    /// Fingerprint of the primary key.
    pub primary_fingerprint: String,
    /// 16-hex long key id of the primary key (advertised as `key_id`).
    pub primary_key_id: String,
    /// Fingerprint of the (sub)key that makes the signature.
    pub signing_fingerprint: String,
    /// 16-hex key id of the (sub)key that makes the signature.
    pub signing_key_id: String,
    /// Whether the signature is made by a subkey rather than the primary key.
    pub signs_with_subkey: bool,
}

/// Chooses the RSA signing key among the keys matched by `requested`; refuses keys
/// Terraform cannot verify. Pure: works on [`parse_colons`] output.
pub fn choose_signing_key(requested: &str, keys: &[Vec<KeyRecord>]) -> Result<SigningKey> {
    let key = match keys {
        [] => {
            return Err(Error::KeyNotFound {
                key: requested.to_owned(),
                home: None,
            });
        }
        [one] => one,
        many => {
            return Err(Error::KeyAmbiguous {
                key: requested.to_owned(),
                count: many.len(),
            });
        }
    };
    let primary = key.first().ok_or_else(|| Error::KeyNotFound {
        key: requested.to_owned(),
        home: None,
    })?;
    if !primary.is_rsa() {
        return Err(Error::UnsupportedKeyAlgorithm {
            key: requested.to_owned(),
            algorithm: algorithm_name(primary.algo),
        });
    }
    if !primary.usable() {
        return Err(Error::CannotSign {
            key: requested.to_owned(),
            reason: format!(
                "the key is revoked, expired or invalid (validity `{}`)",
                primary.validity
            ),
        });
    }
    let signer = if primary.can_sign() {
        primary
    } else {
        let signing: Vec<&KeyRecord> = key[1..]
            .iter()
            .filter(|k| k.usable() && k.can_sign())
            .collect();
        match (
            signing.iter().copied().find(|k| k.is_rsa()),
            signing.first().copied(),
        ) {
            (Some(rsa), _) => rsa,
            (None, Some(other)) => {
                return Err(Error::UnsupportedKeyAlgorithm {
                    key: requested.to_owned(),
                    algorithm: algorithm_name(other.algo),
                });
            }
            (None, None) => {
                return Err(Error::CannotSign {
                    key: requested.to_owned(),
                    reason: "neither the primary key nor a valid subkey has the sign capability"
                        .into(),
                });
            }
        }
    };
    Ok(SigningKey {
        requested: requested.to_owned(),
        primary_fingerprint: primary.fingerprint.clone(),
        primary_key_id: primary.key_id.clone(),
        signing_fingerprint: signer.fingerprint.clone(),
        signing_key_id: signer.key_id.clone(),
        signs_with_subkey: signer.kind == KeyKind::Subkey,
    })
}

/// Parses `gpg --list-packets` output of a detached signature: `(algorithm, issuer key id)`.
pub fn parse_signature_packet(text: &str) -> Option<(u32, String)> {
    let line = text.lines().find(|l| l.starts_with(":signature packet:"))?;
    let rest = line.strip_prefix(":signature packet:")?.trim();
    let mut algo = None;
    let mut keyid = None;
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(a) = part.strip_prefix("algo ") {
            algo = a.trim().parse().ok();
        } else if let Some(k) = part.strip_prefix("keyid ") {
            keyid = Some(k.trim().to_ascii_uppercase());
        }
    }
    Some((algo?, keyid?))
}

/// A `gpg` invocation context (an optional `--homedir`).
#[derive(Debug, Clone, Default)]
pub struct Gpg {
    /// The GnuPG home directory; `None` uses `$GNUPGHOME` or `~/.gnupg`.
    pub home: Option<PathBuf>,
}

impl Gpg {
    fn command(&self) -> Command {
        let mut c = Command::new("gpg");
        if let Some(h) = &self.home {
            c.arg("--homedir").arg(h);
        }
        c
    }

    /// Finds `requested` (fingerprint, key id or user id) in the keyring and chooses its RSA
    /// signing key, checking that the secret part is available.
    pub fn resolve(&self, requested: &str) -> Result<SigningKey> {
        let not_found = || Error::KeyNotFound {
            key: requested.to_owned(),
            home: self.home.clone(),
        };
        let listing = cmd::output(
            self.command()
                .args([
                    "--batch",
                    "--with-colons",
                    "--fixed-list-mode",
                    "--list-keys",
                    "--",
                ])
                .arg(requested),
        )
        .map_err(|e| match e {
            Error::CommandFailed { .. } => not_found(),
            other => other,
        })?;
        let keys = parse_colons(&String::from_utf8_lossy(&listing.stdout));
        let key = choose_signing_key(requested, &keys).map_err(|e| match e {
            Error::KeyNotFound { .. } => not_found(),
            other => other,
        })?;
        let secret = cmd::output(
            self.command()
                .args(["--batch", "--with-colons", "--list-secret-keys", "--"])
                .arg(&key.primary_fingerprint),
        )
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
        let has_secret = secret.lines().any(|l| {
            let f: Vec<&str> = l.split(':').collect();
            matches!(f.first(), Some(&"sec") | Some(&"ssb"))
                && f.get(4)
                    .is_some_and(|id| id.eq_ignore_ascii_case(&key.signing_key_id))
                && f.get(14).is_none_or(|s| !s.starts_with('#'))
        });
        if !has_secret {
            return Err(Error::CannotSign {
                key: requested.to_owned(),
                reason: format!(
                    "the secret key for {} is not in this keyring (only the public key is)",
                    key.signing_key_id
                ),
            });
        }
        Ok(key)
    }

    /// Exports the ASCII-armored public key, keeping only the subkey that signs (if any):
    /// other subkeys are irrelevant to Terraform and may use algorithms it cannot parse.
    pub fn export_armored(&self, key: &SigningKey) -> Result<String> {
        let filter = if key.signs_with_subkey {
            format!("drop-subkey=fpr <> {}", key.signing_fingerprint)
        } else {
            "drop-subkey=fpr -n".to_owned()
        };
        let armor = cmd::stdout_text(
            self.command()
                .args([
                    "--batch",
                    "--armor",
                    "--export-filter",
                    &filter,
                    "--export",
                    "--",
                ])
                .arg(&key.primary_fingerprint),
        )?;
        if !armor.starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----") {
            return Err(Error::CannotSign {
                key: key.requested.clone(),
                reason: "gpg exported no public key".into(),
            });
        }
        Ok(armor)
    }

    /// Writes a binary (not armored) detached signature of `file` to `sig` with the chosen key.
    /// gpg-agent may ask for the passphrase.
    pub fn detach_sign(&self, key: &SigningKey, file: &Path, sig: &Path) -> Result<()> {
        cmd::run_inherited(
            self.command()
                .arg("--yes")
                .arg("--local-user")
                .arg(format!("{}!", key.signing_fingerprint))
                .arg("--output")
                .arg(sig)
                .arg("--detach-sign")
                .arg(file),
        )?;
        let packets =
            cmd::stdout_text(self.command().args(["--batch", "--list-packets"]).arg(sig))?;
        match parse_signature_packet(&packets) {
            Some((algo, _)) if RSA_ALGOS.contains(&algo) => Ok(()),
            Some((algo, _)) => Err(Error::UnsupportedKeyAlgorithm {
                key: key.requested.clone(),
                algorithm: algorithm_name(algo),
            }),
            None => Err(Error::CannotSign {
                key: key.requested.clone(),
                reason: format!("{} holds no signature packet", sig.display()),
            }),
        }
    }
}

/// Checks that `sig` is a valid signature of `data` by a key in `ascii_armor`, using only
/// that key (a throwaway keyring and `gpgv`), as Terraform does with the advertised key.
pub fn verify_with_armored_key(ascii_armor: &str, sig: &Path, data: &Path) -> Result<()> {
    let home = tempfile::Builder::new()
        .prefix("xtask-gpgv")
        .tempdir()
        .map_err(io("create a temporary directory in", std::env::temp_dir()))?;
    let asc = home.path().join("key.asc");
    let keyring = home.path().join("key.gpg");
    std::fs::write(&asc, ascii_armor).map_err(io("write", &asc))?;
    cmd::output(
        Command::new("gpg")
            .arg("--homedir")
            .arg(home.path())
            .args(["--batch", "--dearmor", "--output"])
            .arg(&keyring)
            .arg(&asc),
    )?;
    cmd::output(
        Command::new("gpgv")
            .arg("--homedir")
            .arg(home.path())
            .arg("--keyring")
            .arg(&keyring)
            .arg(sig)
            .arg(data),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA: &str = "tru:o:1:1796219791:1:3:1:5
pub:u:2048:1:70B60228A9F1ADAC:1796219790:::u:::scESC::::::23::0:
fpr:::::::::0DE7086D8081190F5900596470B60228A9F1ADAC:
uid:u::::1796219790::03DC::Test <t@example.com>::::::::::0:
sub:u:2048:1:6C0E1D0C3AED5D44:1796219790::::::e::::::23:
fpr:::::::::C07F9069D1FE04B53DF3827A6C0E1D0C3AED5D44:
";
    const ED: &str = "pub:u:255:22:D9B6AF54D2BBDB97:1796219791:::u:::scSC:::::ed25519:::0:
fpr:::::::::1234D4E60A349832B745EDB5D9B6AF54D2BBDB97:
";

    #[test]
    fn parses_a_listing() {
        let keys = parse_colons(RSA);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].len(), 2);
        assert_eq!(keys[0][0].key_id, "70B60228A9F1ADAC");
        assert_eq!(
            keys[0][1].fingerprint,
            "C07F9069D1FE04B53DF3827A6C0E1D0C3AED5D44"
        );
    }

    #[test]
    fn chooses_the_rsa_primary() {
        let k = choose_signing_key("t@example.com", &parse_colons(RSA)).unwrap();
        assert_eq!(k.primary_key_id, "70B60228A9F1ADAC");
        assert_eq!(
            k.signing_fingerprint,
            "0DE7086D8081190F5900596470B60228A9F1ADAC"
        );
        assert!(!k.signs_with_subkey);
    }

    #[test]
    fn refuses_ed25519_saying_why() {
        let err = choose_signing_key("ed", &parse_colons(ED))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Terraform only verifies RSA"), "{err}");
        assert!(err.contains("EdDSA"), "{err}");
    }

    #[test]
    fn refuses_ambiguous_selectors() {
        let both = format!("{RSA}{ED}");
        let err = choose_signing_key("example", &parse_colons(&both)).unwrap_err();
        assert!(matches!(err, Error::KeyAmbiguous { count: 2, .. }));
    }

    #[test]
    fn uses_an_rsa_signing_subkey_when_the_primary_cannot_sign() {
        let text = "pub:u:3072:1:AAAAAAAAAAAAAAAA:1::::::cSC:
fpr:::::::::AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA:
sub:u:3072:1:BBBBBBBBBBBBBBBB:1::::::s:
fpr:::::::::BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB:
";
        let k = choose_signing_key("x", &parse_colons(text)).unwrap();
        assert!(k.signs_with_subkey);
        assert_eq!(k.signing_key_id, "BBBBBBBBBBBBBBBB");
        assert_eq!(k.primary_key_id, "AAAAAAAAAAAAAAAA");
    }

    #[test]
    fn parses_signature_packets() {
        let text = "# off=0 ctb=89 tag=2 hlen=3 plen=307\n:signature packet: algo 1, keyid 70B60228A9F1ADAC\n\tversion 4\n";
        assert_eq!(
            parse_signature_packet(text),
            Some((1, "70B60228A9F1ADAC".to_owned()))
        );
    }
}
