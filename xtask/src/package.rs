//! Release artifacts: file names, deterministic zips of the provider binary, and SHA256SUMS.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

use crate::error::{Error, Result, io};
use crate::registry::Platform;

/// The provider's program name.
pub const PROGRAM: &str = "terraform-provider-sless";
/// Mode of the binary inside the zip.
pub const BINARY_MODE: u32 = 0o755;

/// `terraform-provider-sless_VERSION_OS_ARCH.zip`.
pub fn zip_name(version: &str, platform: &Platform) -> String {
    format!("{PROGRAM}_{version}_{}_{}.zip", platform.os, platform.arch)
}

/// `terraform-provider-sless_vVERSION` (`.exe` on Windows): the binary's name inside the zip.
pub fn binary_name(version: &str, platform: &Platform) -> String {
    let exe = if platform.os == "windows" { ".exe" } else { "" };
    format!("{PROGRAM}_v{version}{exe}")
}

/// `terraform-provider-sless_VERSION_SHA256SUMS`.
pub fn sums_name(version: &str) -> String {
    format!("{PROGRAM}_{version}_SHA256SUMS")
}

/// `terraform-provider-sless_VERSION_SHA256SUMS.sig`.
pub fn sig_name(version: &str) -> String {
    format!("{}.sig", sums_name(version))
}

/// `terraform-provider-sless_VERSION_manifest.json`.
pub fn manifest_name(version: &str) -> String {
    format!("{PROGRAM}_{version}_manifest.json")
}

/// Hex SHA-256 of a byte slice.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Hex SHA-256 of a file's contents.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(io("open", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(io("read", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Zips `binary` as `binary_name(version, platform)` with mode 0755 into `out_dir`.
/// The archive is deterministic: fixed timestamp (1980-01-01), one entry, no extra fields.
pub fn zip_binary(
    binary: &Path,
    version: &str,
    platform: &Platform,
    out_dir: &Path,
) -> Result<PathBuf> {
    let zip_path = out_dir.join(zip_name(version, platform));
    let bytes = fs::read(binary).map_err(io("read the provider binary", binary))?;
    let file = File::create(&zip_path).map_err(io("create", &zip_path))?;
    let zerr = |source| Error::Zip {
        path: zip_path.clone(),
        source,
    };
    let mut zip = zip::ZipWriter::new(file);
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(BINARY_MODE);
    zip.start_file(binary_name(version, platform), options)
        .map_err(zerr)?;
    zip.write_all(&bytes).map_err(io("write into", &zip_path))?;
    zip.finish().map_err(zerr)?;
    Ok(zip_path)
}

/// One line of a SHA256SUMS file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SumLine {
    /// Lowercase hex SHA-256.
    pub sha256: String,
    /// File name.
    pub name: String,
}

/// Renders SHA256SUMS in `sha256sum` format (`<hex>  <name>\n`), sorted by name.
pub fn render_sums(lines: &[SumLine]) -> String {
    let mut sorted = lines.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted
        .iter()
        .map(|l| format!("{}  {}\n", l.sha256, l.name))
        .collect()
}

/// Hashes `files` and writes their SHA256SUMS to `out`.
pub fn write_sums(files: &[PathBuf], out: &Path) -> Result<Vec<SumLine>> {
    let mut lines = Vec::new();
    for f in files {
        lines.push(SumLine {
            sha256: sha256_file(f)?,
            name: f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        });
    }
    fs::write(out, render_sums(&lines)).map_err(io("write", out))?;
    Ok(lines)
}

/// Parses SHA256SUMS text; every line must be `<64 hex>  <name>` (a `*` before the name,
/// binary mode in `sha256sum`, is accepted).
pub fn parse_sums(text: &str) -> std::result::Result<Vec<SumLine>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let (hash, name) = line
                .split_once(' ')
                .ok_or_else(|| format!("line {}: expected `<sha256>  <file>`", i + 1))?;
            let name = name.trim_start_matches(' ').trim_start_matches('*');
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "line {}: `{hash}` is not a SHA-256 hex digest",
                    i + 1
                ));
            }
            if name.is_empty() {
                return Err(format!("line {}: missing file name", i + 1));
            }
            Ok(SumLine {
                sha256: hash.to_ascii_lowercase(),
                name: name.to_owned(),
            })
        })
        .collect()
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

    #[test]
    fn names_follow_the_hashicorp_convention() {
        assert_eq!(
            zip_name("0.1.0", &linux()),
            "terraform-provider-sless_0.1.0_linux_amd64.zip"
        );
        assert_eq!(
            binary_name("0.1.0", &linux()),
            "terraform-provider-sless_v0.1.0"
        );
        let win = Platform {
            os: "windows".into(),
            arch: "amd64".into(),
        };
        assert_eq!(
            binary_name("0.1.0", &win),
            "terraform-provider-sless_v0.1.0.exe"
        );
        assert_eq!(
            sig_name("0.1.0"),
            "terraform-provider-sless_0.1.0_SHA256SUMS.sig"
        );
        assert_eq!(
            manifest_name("0.1.0"),
            "terraform-provider-sless_0.1.0_manifest.json"
        );
    }

    #[test]
    fn zip_is_deterministic_and_executable() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::write(&bin, b"#!/bin/sh\necho hi\n").unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let za = zip_binary(&bin, "0.1.0", &linux(), &a).unwrap();
        let zb = zip_binary(&bin, "0.1.0", &linux(), &b).unwrap();
        assert_eq!(fs::read(&za).unwrap(), fs::read(&zb).unwrap());
        let mut archive = zip::ZipArchive::new(File::open(&za).unwrap()).unwrap();
        assert_eq!(archive.len(), 1);
        let entry = archive.by_index(0).unwrap();
        assert_eq!(entry.name(), "terraform-provider-sless_v0.1.0");
        assert_eq!(entry.unix_mode().unwrap() & 0o777, 0o755);
    }

    #[test]
    fn sums_round_trip() {
        let lines = vec![
            SumLine {
                sha256: "b".repeat(64),
                name: "z.zip".into(),
            },
            SumLine {
                sha256: "a".repeat(64),
                name: "m.json".into(),
            },
        ];
        let text = render_sums(&lines);
        assert!(text.starts_with(&format!("{}  m.json\n", "a".repeat(64))));
        let parsed = parse_sums(&text).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].name, "z.zip");
        assert!(parse_sums("nothex  x\n").is_err());
    }

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
