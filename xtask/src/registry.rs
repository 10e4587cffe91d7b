//! The static Provider Registry Protocol v1 tree: documents, layout, and merging of versions.
//!
//! Layout under the output root (everything relative, so the tree uploads anywhere):
//! ```text
//! .well-known/terraform.json                                  {"providers.v1": "/v1/providers/"}
//! v1/providers/NS/sless/versions                              all published versions
//! v1/providers/NS/sless/VERSION/download/OS/ARCH              one package document per platform
//! v1/providers/NS/sless/VERSION/terraform-provider-sless_...  zips, SHA256SUMS, .sig, manifest
//! ```
//! A download document at `VERSION/download/OS/ARCH` points at `../../FILE`, i.e. `VERSION/FILE`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, io};
use crate::validate::compare_versions;

/// The provider type name in source addresses (`HOST/NS/sless`).
pub const PROVIDER_TYPE: &str = "sless";
/// Where the discovery document lives in the tree.
pub const DISCOVERY_PATH: &str = ".well-known/terraform.json";
/// The `providers.v1` base URL advertised by discovery (absolute path on the same host).
pub const PROVIDERS_BASE: &str = "/v1/providers/";

/// An `os`/`arch` pair in Terraform's naming (`linux`/`amd64`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Platform {
    /// Operating system, e.g. `linux`, `darwin`, `windows`.
    pub os: String,
    /// Architecture, e.g. `amd64`, `arm64`.
    pub arch: String,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}_{}", self.os, self.arch)
    }
}

/// The discovery document `.well-known/terraform.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// Base URL of the providers API; must end in `/`.
    #[serde(rename = "providers.v1")]
    pub providers_v1: String,
}

/// The `versions` document of one provider.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Versions {
    /// Every installable version.
    pub versions: Vec<VersionEntry>,
}

/// One entry of the `versions` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionEntry {
    /// The version, e.g. `0.1.0`.
    pub version: String,
    /// Plugin protocols, e.g. `["6.0"]`.
    pub protocols: Vec<String>,
    /// Platforms with a package.
    pub platforms: Vec<Platform>,
}

/// The package (download) document for one version and platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Download {
    /// Plugin protocols.
    pub protocols: Vec<String>,
    /// Operating system (echoes the request).
    pub os: String,
    /// Architecture (echoes the request).
    pub arch: String,
    /// The zip's file name, as listed in SHA256SUMS.
    pub filename: String,
    /// URL of the zip, relative to this document.
    pub download_url: String,
    /// URL of SHA256SUMS, relative to this document.
    pub shasums_url: String,
    /// URL of the binary detached signature of SHA256SUMS, relative to this document.
    pub shasums_signature_url: String,
    /// Hex SHA-256 of the zip.
    pub shasum: String,
    /// Keys that may have signed SHA256SUMS.
    pub signing_keys: SigningKeys,
}

/// The `signing_keys` object of a download document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKeys {
    /// ASCII-armored public keys.
    pub gpg_public_keys: Vec<GpgPublicKey>,
}

/// One public key in a download document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpgPublicKey {
    /// 16-hex long key id (informational; Terraform selects by the signature's issuer).
    pub key_id: String,
    /// The ASCII-armored public key block.
    pub ascii_armor: String,
}

/// Everything about one platform's package needed to write its download document.
#[derive(Debug, Clone)]
pub struct PackageRef {
    /// The platform.
    pub platform: Platform,
    /// The zip's file name.
    pub filename: String,
    /// Hex SHA-256 of the zip.
    pub shasum: String,
}

/// The discovery document this tool publishes.
pub fn discovery() -> Discovery {
    Discovery {
        providers_v1: PROVIDERS_BASE.to_owned(),
    }
}

/// `v1/providers/NS/sless`, relative to the tree root.
pub fn provider_dir(namespace: &str) -> PathBuf {
    Path::new("v1/providers")
        .join(namespace)
        .join(PROVIDER_TYPE)
}

/// `v1/providers/NS/sless/versions`, relative to the tree root.
pub fn versions_path(namespace: &str) -> PathBuf {
    provider_dir(namespace).join("versions")
}

/// `v1/providers/NS/sless/VERSION`: where a version's artifacts are stored.
pub fn version_dir(namespace: &str, version: &str) -> PathBuf {
    provider_dir(namespace).join(version)
}

/// `v1/providers/NS/sless/VERSION/download/OS/ARCH`.
pub fn download_path(namespace: &str, version: &str, platform: &Platform) -> PathBuf {
    version_dir(namespace, version)
        .join("download")
        .join(&platform.os)
        .join(&platform.arch)
}

/// The URL of an artifact stored in the version directory, relative to a download document.
pub fn relative_artifact_url(file_name: &str) -> String {
    format!("../../{file_name}")
}

/// Resolves a URL found in a download document to a path in the tree, if it is relative and
/// stays inside the tree. `doc` is the document's path relative to the tree root.
pub fn resolve_relative(doc: &Path, url: &str) -> Option<PathBuf> {
    if url.contains("://") || url.starts_with('/') || url.contains(['?', '#', '\\']) {
        return None;
    }
    let mut parts: Vec<String> = doc
        .parent()?
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for seg in url.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s.to_owned()),
        }
    }
    Some(parts.iter().collect())
}

/// The download document for one package of a release.
pub fn download_document(
    protocols: &[String],
    package: &PackageRef,
    sums_name: &str,
    sig_name: &str,
    key: &GpgPublicKey,
) -> Download {
    Download {
        protocols: protocols.to_vec(),
        os: package.platform.os.clone(),
        arch: package.platform.arch.clone(),
        filename: package.filename.clone(),
        download_url: relative_artifact_url(&package.filename),
        shasums_url: relative_artifact_url(sums_name),
        shasums_signature_url: relative_artifact_url(sig_name),
        shasum: package.shasum.clone(),
        signing_keys: SigningKeys {
            gpg_public_keys: vec![key.clone()],
        },
    }
}

/// Merges `entry` into an existing `versions` document: a version already present is
/// replaced, others are kept, and the result is sorted by version.
pub fn merge_versions(existing: Versions, mut entry: VersionEntry) -> Versions {
    entry.platforms.sort();
    entry.platforms.dedup();
    let mut versions: Vec<VersionEntry> = existing
        .versions
        .into_iter()
        .filter(|v| v.version != entry.version)
        .collect();
    versions.push(entry);
    versions.sort_by(|a, b| compare_versions(&a.version, &b.version));
    Versions { versions }
}

/// Serializes a document as pretty JSON with a trailing newline.
pub fn to_json<T: Serialize>(doc: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail.
    let mut out = serde_json::to_vec_pretty(doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Reads a JSON document of type `T`, naming `what` in errors.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path, what: &'static str) -> Result<T> {
    let bytes = fs::read(path).map_err(io("read", path))?;
    serde_json::from_slice(&bytes).map_err(|source| Error::Json {
        path: path.to_owned(),
        what,
        source,
    })
}

/// Writes `bytes` to `path` atomically (temporary file + rename), creating parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(io("create directory", parent))?;
    let tmp = parent.join(format!(
        ".{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    fs::write(&tmp, bytes).map_err(io("write", &tmp))?;
    fs::rename(&tmp, path).map_err(io("rename into place", path))
}

/// One release to add to a tree.
#[derive(Debug, Clone)]
pub struct Publication<'a> {
    /// Registry namespace.
    pub namespace: &'a str,
    /// Version being published.
    pub version: &'a str,
    /// Plugin protocols (from the manifest).
    pub protocols: &'a [String],
    /// The packages, one per platform.
    pub packages: &'a [PackageRef],
    /// Files to store in the version directory (zips, SHA256SUMS, .sig, manifest copy).
    pub artifacts: &'a [PathBuf],
    /// File name of SHA256SUMS.
    pub sums_name: &'a str,
    /// File name of the signature.
    pub sig_name: &'a str,
    /// The signing key as advertised.
    pub key: &'a GpgPublicKey,
}

/// Writes a release into the tree at `root`, merging with what is there: the discovery
/// document, the version's artifacts and download documents (replacing an earlier
/// publication of the same version), and the merged `versions` document (written last,
/// so a version is only advertised once its files are in place).
pub fn publish(root: &Path, p: &Publication<'_>) -> Result<()> {
    let discovery_file = root.join(DISCOVERY_PATH);
    write_atomic(&discovery_file, &to_json(&discovery()))?;

    let versions_file = root.join(versions_path(p.namespace));
    let existing: Versions = if versions_file.exists() {
        read_json(&versions_file, "registry versions document")?
    } else {
        Versions::default()
    };

    let vdir = root.join(version_dir(p.namespace, p.version));
    if vdir.exists() {
        fs::remove_dir_all(&vdir).map_err(io("remove the earlier publication", &vdir))?;
    }
    fs::create_dir_all(&vdir).map_err(io("create directory", &vdir))?;
    for file in p.artifacts {
        let name = file.file_name().ok_or_else(|| Error::InvalidArgument {
            field: "artifact",
            value: file.display().to_string(),
            reason: "has no file name".into(),
        })?;
        let dest = vdir.join(name);
        fs::copy(file, &dest).map_err(io("copy artifact to", &dest))?;
    }
    for package in p.packages {
        let doc = download_document(p.protocols, package, p.sums_name, p.sig_name, p.key);
        write_atomic(
            &root.join(download_path(p.namespace, p.version, &package.platform)),
            &to_json(&doc),
        )?;
    }
    let merged = merge_versions(
        existing,
        VersionEntry {
            version: p.version.to_owned(),
            protocols: p.protocols.to_vec(),
            platforms: p.packages.iter().map(|k| k.platform.clone()).collect(),
        },
    );
    write_atomic(&versions_file, &to_json(&merged))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux() -> Platform {
        Platform {
            os: "linux".into(),
            arch: "amd64".into(),
        }
    }

    fn entry(v: &str) -> VersionEntry {
        VersionEntry {
            version: v.into(),
            protocols: vec!["6.0".into()],
            platforms: vec![linux()],
        }
    }

    #[test]
    fn merge_keeps_older_versions_and_sorts() {
        let v = merge_versions(Versions::default(), entry("0.2.0"));
        let v = merge_versions(v, entry("0.1.0"));
        let v = merge_versions(v, entry("0.10.0"));
        let names: Vec<_> = v.versions.iter().map(|e| e.version.as_str()).collect();
        assert_eq!(names, ["0.1.0", "0.2.0", "0.10.0"]);
    }

    #[test]
    fn merge_replaces_a_republished_version() {
        let v = merge_versions(Versions::default(), entry("0.1.0"));
        let mut again = entry("0.1.0");
        again.platforms.push(Platform {
            os: "darwin".into(),
            arch: "arm64".into(),
        });
        let v = merge_versions(v, again);
        assert_eq!(v.versions.len(), 1);
        assert_eq!(v.versions[0].platforms.len(), 2);
    }

    #[test]
    fn versions_document_has_protocol_shape() {
        let v = merge_versions(Versions::default(), entry("0.1.0"));
        let json: serde_json::Value = serde_json::from_slice(&to_json(&v)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"versions": [{"version": "0.1.0", "protocols": ["6.0"],
                "platforms": [{"os": "linux", "arch": "amd64"}]}]})
        );
    }

    #[test]
    fn discovery_base_ends_with_slash() {
        let json: serde_json::Value = serde_json::from_slice(&to_json(&discovery())).unwrap();
        assert_eq!(json, serde_json::json!({"providers.v1": "/v1/providers/"}));
    }

    #[test]
    fn download_document_urls_resolve_to_the_version_dir() {
        let key = GpgPublicKey {
            key_id: "0123456789ABCDEF".into(),
            ascii_armor: "-----BEGIN PGP PUBLIC KEY BLOCK-----\n".into(),
        };
        let pkg = PackageRef {
            platform: linux(),
            filename: "terraform-provider-sless_0.1.0_linux_amd64.zip".into(),
            shasum: "ab".repeat(32),
        };
        let doc = download_document(
            &["6.0".into()],
            &pkg,
            "terraform-provider-sless_0.1.0_SHA256SUMS",
            "terraform-provider-sless_0.1.0_SHA256SUMS.sig",
            &key,
        );
        assert_eq!(
            doc.download_url,
            "../../terraform-provider-sless_0.1.0_linux_amd64.zip"
        );
        let doc_path = download_path("acme", "0.1.0", &linux());
        assert_eq!(
            doc_path,
            Path::new("v1/providers/acme/sless/0.1.0/download/linux/amd64")
        );
        assert_eq!(
            resolve_relative(&doc_path, &doc.download_url).unwrap(),
            version_dir("acme", "0.1.0").join(&pkg.filename)
        );
        assert_eq!(
            resolve_relative(&doc_path, &doc.shasums_signature_url).unwrap(),
            version_dir("acme", "0.1.0").join("terraform-provider-sless_0.1.0_SHA256SUMS.sig")
        );
    }

    #[test]
    fn resolve_refuses_absolute_and_escaping_urls() {
        let doc = Path::new("a/b");
        assert!(resolve_relative(doc, "https://x/y").is_none());
        assert!(resolve_relative(doc, "/y").is_none());
        assert!(resolve_relative(doc, "../../y").is_none());
    }

    #[test]
    fn publish_merges_into_an_existing_tree() {
        let root = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        let key = GpgPublicKey {
            key_id: "0123456789ABCDEF".into(),
            ascii_armor: "armor".into(),
        };
        for v in ["0.1.0", "0.2.0", "0.1.0"] {
            let zip = src
                .path()
                .join(format!("terraform-provider-sless_{v}_linux_amd64.zip"));
            fs::write(&zip, v).unwrap();
            let pkgs = [PackageRef {
                platform: linux(),
                filename: zip.file_name().unwrap().to_string_lossy().into_owned(),
                shasum: "00".repeat(32),
            }];
            publish(
                root.path(),
                &Publication {
                    namespace: "acme",
                    version: v,
                    protocols: &["6.0".into()],
                    packages: &pkgs,
                    artifacts: &[zip],
                    sums_name: "s",
                    sig_name: "s.sig",
                    key: &key,
                },
            )
            .unwrap();
        }
        let versions: Versions =
            read_json(&root.path().join(versions_path("acme")), "versions").unwrap();
        let names: Vec<_> = versions
            .versions
            .iter()
            .map(|e| e.version.as_str())
            .collect();
        assert_eq!(names, ["0.1.0", "0.2.0"]);
        assert!(
            root.path()
                .join(download_path("acme", "0.2.0", &linux()))
                .is_file()
        );
        assert!(root.path().join(DISCOVERY_PATH).is_file());
    }
}
