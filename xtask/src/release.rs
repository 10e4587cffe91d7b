//! The `release` command: build, package, sign, publish into the registry tree, verify.

use std::fs;
use std::path::{Path, PathBuf};

use crate::build::{self, TargetSelection};
use crate::error::{Error, Result, io};
use crate::manifest;
use crate::package;
use crate::registry::{self, GpgPublicKey, PackageRef, Platform, Publication};
use crate::sign::Gpg;
use crate::validate;
use crate::verify::{self, Expected};

/// Everything the release command needs.
#[derive(Debug, Clone)]
pub struct ReleaseOptions {
    /// Version to publish, e.g. `0.1.0`.
    pub version: String,
    /// Registry namespace.
    pub namespace: String,
    /// GPG key selector (fingerprint, key id or user id).
    pub gpg_key: String,
    /// GnuPG home directory, if not the default.
    pub gnupg_home: Option<PathBuf>,
    /// Root of the static registry tree.
    pub out: PathBuf,
    /// Which targets to build.
    pub targets: TargetSelection,
    /// Root of a packed filesystem mirror to also write, if any.
    pub mirror: Option<PathBuf>,
    /// Registry host for the mirror layout (`HOST` in `MIRROR/HOST/NS/sless`).
    pub host: Option<String>,
    /// Cargo profile to build with.
    pub cargo_profile: String,
    /// The workspace root (holds `registry-manifest.json`).
    pub workspace: PathBuf,
    /// Use these prebuilt binaries instead of building (platform, path).
    pub prebuilt: Vec<(Platform, PathBuf)>,
}

/// What a release produced.
#[derive(Debug, Clone)]
pub struct ReleaseSummary {
    /// The published version.
    pub version: String,
    /// Platforms packaged.
    pub platforms: Vec<Platform>,
    /// The advertised key id.
    pub key_id: String,
    /// The version directory in the tree (artifacts).
    pub version_dir: PathBuf,
    /// Mirror directory written, if any.
    pub mirror_dir: Option<PathBuf>,
    /// How many packages and signatures the self-check covered.
    pub verified_packages: usize,
    /// How many signatures the self-check verified with the advertised key.
    pub verified_signatures: usize,
}

/// Runs a release end to end; nothing is left half-checked: the output is verified last.
pub fn run(opts: &ReleaseOptions) -> Result<ReleaseSummary> {
    validate::version(&opts.version)?;
    validate::namespace(&opts.namespace)?;
    let mirror_host = match (&opts.mirror, &opts.host) {
        (Some(_), None) => {
            return Err(Error::InvalidArgument {
                field: "--host",
                value: String::new(),
                reason: "--mirror needs --host, the registry host users write in `source`".into(),
            });
        }
        (Some(_), Some(h)) => {
            validate::host(h)?;
            Some(h.clone())
        }
        (None, _) => None,
    };
    let manifest = manifest::load(&opts.workspace)?;
    let gpg = Gpg {
        home: opts.gnupg_home.clone(),
    };
    // Check the key before the (long) build.
    let key = gpg.resolve(&opts.gpg_key)?;
    let armor = gpg.export_armored(&key)?;
    eprintln!(
        "xtask: signing with RSA key {} (signature by {})",
        key.primary_key_id, key.signing_key_id
    );

    let binaries = if opts.prebuilt.is_empty() {
        let host = build::host_triple()?;
        let installed = build::installed_targets();
        let targets = build::plan_targets(&host, &installed, opts.targets)?;
        let target_dir = build::target_dir(&opts.workspace)?;
        let mut out = Vec::new();
        for t in &targets {
            let bin = build::build_provider(
                &opts.workspace,
                &target_dir,
                t,
                &opts.cargo_profile,
                &opts.version,
            )?;
            out.push((t.platform.clone(), bin));
        }
        out
    } else {
        opts.prebuilt.clone()
    };

    let staging = tempfile::Builder::new()
        .prefix("sless-release")
        .tempdir()
        .map_err(io("create a temporary directory in", std::env::temp_dir()))?;
    let stage = staging.path();
    let mut packages = Vec::new();
    let mut zips = Vec::new();
    for (platform, bin) in &binaries {
        let zip = package::zip_binary(bin, &opts.version, platform, stage)?;
        packages.push(PackageRef {
            platform: platform.clone(),
            filename: package::zip_name(&opts.version, platform),
            shasum: package::sha256_file(&zip)?,
        });
        zips.push(zip);
    }
    let manifest_copy = stage.join(package::manifest_name(&opts.version));
    fs::write(&manifest_copy, &manifest.bytes).map_err(io("write", &manifest_copy))?;
    let sums = stage.join(package::sums_name(&opts.version));
    let mut summed = zips.clone();
    summed.push(manifest_copy.clone());
    package::write_sums(&summed, &sums)?;
    let sig = stage.join(package::sig_name(&opts.version));
    gpg.detach_sign(&key, &sums, &sig)?;

    let mut artifacts = summed;
    artifacts.push(sums.clone());
    artifacts.push(sig.clone());
    let public_key = GpgPublicKey {
        key_id: key.primary_key_id.clone(),
        ascii_armor: armor,
    };
    registry::publish(
        &opts.out,
        &Publication {
            namespace: &opts.namespace,
            version: &opts.version,
            protocols: &manifest.manifest.metadata.protocol_versions,
            packages: &packages,
            artifacts: &artifacts,
            sums_name: &package::sums_name(&opts.version),
            sig_name: &package::sig_name(&opts.version),
            key: &public_key,
        },
    )?;

    let mirror_dir = match (&opts.mirror, &mirror_host) {
        (Some(m), Some(h)) => Some(write_mirror(m, h, &opts.namespace, &zips)?),
        _ => None,
    };

    let platforms: Vec<Platform> = packages.iter().map(|p| p.platform.clone()).collect();
    let verified = verify::verify_tree(
        &opts.out,
        &opts.namespace,
        &Expected {
            version: &opts.version,
            platforms: &platforms,
            key_id: &key.primary_key_id,
            manifest: &manifest,
        },
    )?;
    if let Some(m) = &mirror_dir {
        verify::verify_mirror(m, &zips)?;
    }
    Ok(ReleaseSummary {
        version: opts.version.clone(),
        platforms,
        key_id: key.primary_key_id,
        version_dir: opts
            .out
            .join(registry::version_dir(&opts.namespace, &opts.version)),
        mirror_dir,
        verified_packages: verified.packages.len(),
        verified_signatures: verified.signatures,
    })
}

/// Copies the zips into the packed filesystem-mirror layout `MIRROR/HOST/NS/sless/`.
pub fn write_mirror(
    mirror: &Path,
    host: &str,
    namespace: &str,
    zips: &[PathBuf],
) -> Result<PathBuf> {
    let dir = mirror
        .join(host)
        .join(namespace)
        .join(registry::PROVIDER_TYPE);
    fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
    for zip in zips {
        if let Some(name) = zip.file_name() {
            let dest = dir.join(name);
            fs::copy(zip, &dest).map_err(io("copy into the mirror", &dest))?;
        }
    }
    Ok(dir)
}
