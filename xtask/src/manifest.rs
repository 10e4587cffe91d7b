//! The provider's registry manifest (`registry-manifest.json`), which states the plugin protocol.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, io};

/// The file name of the manifest at the workspace root.
pub const FILE_NAME: &str = "registry-manifest.json";

/// `{"version": 1, "metadata": {"protocol_versions": ["6.0"]}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryManifest {
    /// Manifest format version; only 1 exists.
    pub version: u32,
    /// Provider metadata.
    pub metadata: ManifestMetadata,
}

/// The `metadata` object of the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestMetadata {
    /// Plugin protocol versions the binary speaks, e.g. `["6.0"]`.
    pub protocol_versions: Vec<String>,
}

/// A loaded manifest with its exact bytes (the release ships a byte-identical copy).
#[derive(Debug, Clone)]
pub struct LoadedManifest {
    /// Where it was read from.
    pub path: PathBuf,
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// The parsed document.
    pub manifest: RegistryManifest,
}

impl RegistryManifest {
    /// Parses and checks a manifest; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let manifest: RegistryManifest =
            serde_json::from_slice(bytes).map_err(|source| Error::Json {
                path: path.to_owned(),
                what: "registry manifest",
                source,
            })?;
        let invalid = |reason: String| Error::InvalidDocument {
            path: path.to_owned(),
            what: "registry manifest",
            reason,
        };
        if manifest.version != 1 {
            return Err(invalid(format!(
                "\"version\" is {}, only 1 is defined",
                manifest.version
            )));
        }
        if manifest.metadata.protocol_versions.is_empty() {
            return Err(invalid("\"metadata.protocol_versions\" is empty".into()));
        }
        for p in &manifest.metadata.protocol_versions {
            match protocol_major(p) {
                Some(5 | 6) => {}
                _ => {
                    return Err(invalid(format!(
                        "protocol version `{p}` is not one Terraform accepts (5.x or 6.x)"
                    )));
                }
            }
        }
        Ok(manifest)
    }
}

/// The major number of a protocol version such as `6.0`.
pub fn protocol_major(protocol: &str) -> Option<u32> {
    let (major, minor) = protocol.split_once('.')?;
    minor.parse::<u32>().ok()?;
    major.parse().ok()
}

/// Reads and checks `registry-manifest.json` in `workspace`.
pub fn load(workspace: &Path) -> Result<LoadedManifest> {
    let path = workspace.join(FILE_NAME);
    let bytes = std::fs::read(&path).map_err(io("read", &path))?;
    let manifest = RegistryManifest::parse(&bytes, &path)?;
    Ok(LoadedManifest {
        path,
        bytes,
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_canonical_manifest() {
        let m = RegistryManifest::parse(
            br#"{"version": 1, "metadata": {"protocol_versions": ["6.0"]}}"#,
            Path::new("m.json"),
        )
        .unwrap();
        assert_eq!(m.metadata.protocol_versions, vec!["6.0"]);
    }

    #[test]
    fn rejects_unknown_protocol_and_version() {
        let err = RegistryManifest::parse(
            br#"{"version": 1, "metadata": {"protocol_versions": ["7.0"]}}"#,
            Path::new("m.json"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("7.0"), "{err}");
        let err = RegistryManifest::parse(
            br#"{"version": 2, "metadata": {"protocol_versions": ["6.0"]}}"#,
            Path::new("m.json"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("version"), "{err}");
    }

    #[test]
    fn protocol_major_parses() {
        assert_eq!(protocol_major("6.0"), Some(6));
        assert_eq!(protocol_major("6"), None);
        assert_eq!(protocol_major("x.0"), None);
    }
}
