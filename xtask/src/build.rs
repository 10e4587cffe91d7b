//! Building the provider binary with cargo for the host and other installed targets.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::error::{Error, Result};
use crate::package::PROGRAM;
use crate::registry::Platform;

/// The cargo package of the provider.
pub const PROVIDER_PACKAGE: &str = "terraform-provider-sless";
/// The environment variable the provider reads its version from at compile time.
pub const VERSION_ENV: &str = "SLESS_PROVIDER_VERSION";

/// Which targets to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetSelection {
    /// Only the host.
    Host,
    /// The host and every other target whose standard library is installed (rustup).
    All,
}

/// A target to build and the Terraform platform it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildTarget {
    /// The Rust target triple.
    pub triple: String,
    /// Whether it is the host (built without `--target`).
    pub is_host: bool,
    /// The Terraform platform.
    pub platform: Platform,
}

/// Maps a Rust target triple to Terraform's `os`/`arch`, if Terraform has such a platform.
pub fn platform_of(triple: &str) -> Option<Platform> {
    let arch = triple.split('-').next()?;
    let arch = match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "i686" | "i586" => "386",
        a if a.starts_with("armv7") || a == "arm" => "arm",
        _ => return None,
    };
    let os = if triple.contains("-linux-") {
        "linux"
    } else if triple.contains("-apple-darwin") {
        "darwin"
    } else if triple.contains("-windows-") {
        "windows"
    } else if triple.contains("-freebsd") {
        "freebsd"
    } else if triple.contains("-openbsd") {
        "openbsd"
    } else {
        return None;
    };
    Some(Platform {
        os: os.into(),
        arch: arch.into(),
    })
}

/// The cargo program: `$CARGO` when run by cargo, else `cargo`.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The host triple, from `rustc -vV`.
pub fn host_triple() -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let text = cmd::stdout_text(Command::new(rustc).arg("-vV"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_owned())
        .ok_or_else(|| Error::NoTargets("`rustc -vV` printed no host triple".into()))
}

/// Targets whose standard library rustup has installed; empty without rustup.
pub fn installed_targets() -> Vec<String> {
    cmd::stdout_text(Command::new("rustup").args(["target", "list", "--installed"]))
        .map(|t| {
            t.lines()
                .map(|l| l.trim().to_owned())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Chooses the targets to build: the host first, then (for [`TargetSelection::All`]) every
/// other installed target that maps to a distinct Terraform platform. Pure.
pub fn plan_targets(
    host: &str,
    installed: &[String],
    selection: TargetSelection,
) -> Result<Vec<BuildTarget>> {
    let host_platform = platform_of(host).ok_or_else(|| {
        Error::NoTargets(format!("the host target {host} has no Terraform platform"))
    })?;
    let mut targets = vec![BuildTarget {
        triple: host.to_owned(),
        is_host: true,
        platform: host_platform,
    }];
    if selection == TargetSelection::All {
        for t in installed {
            if t == host {
                continue;
            }
            let Some(platform) = platform_of(t) else {
                continue;
            };
            if targets.iter().any(|b| b.platform == platform) {
                continue;
            }
            targets.push(BuildTarget {
                triple: t.clone(),
                is_host: false,
                platform,
            });
        }
    }
    Ok(targets)
}

/// The workspace's target directory, from `cargo metadata`.
pub fn target_dir(workspace: &Path) -> Result<PathBuf> {
    let text = cmd::stdout_text(cargo().current_dir(workspace).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
    ]))?;
    let meta: serde_json::Value = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: workspace.join("Cargo.toml"),
        what: "`cargo metadata` output",
        source,
    })?;
    meta.get("target_directory")
        .and_then(|v| v.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| Error::NoTargets("`cargo metadata` printed no target_directory".into()))
}

/// The output directory name of a cargo profile (`dev` builds into `debug`).
pub fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    }
}

/// Builds the provider for `target` with `SLESS_PROVIDER_VERSION=version` and returns the binary.
pub fn build_provider(
    workspace: &Path,
    target_dir: &Path,
    target: &BuildTarget,
    profile: &str,
    version: &str,
) -> Result<PathBuf> {
    let mut c = cargo();
    c.current_dir(workspace).env(VERSION_ENV, version).args([
        "build",
        "--profile",
        profile,
        "-p",
        PROVIDER_PACKAGE,
    ]);
    if !target.is_host {
        c.args(["--target", &target.triple]);
    }
    eprintln!(
        "xtask: building {PROVIDER_PACKAGE} {version} for {} ({})",
        target.platform, target.triple
    );
    cmd::run_inherited(&mut c)?;
    let mut dir = target_dir.to_path_buf();
    if !target.is_host {
        dir.push(&target.triple);
    }
    dir.push(profile_dir(profile));
    let exe = if target.platform.os == "windows" {
        ".exe"
    } else {
        ""
    };
    let bin = dir.join(format!("{PROGRAM}{exe}"));
    if !bin.is_file() {
        return Err(Error::NoTargets(format!(
            "cargo reported success but {} does not exist",
            bin.display()
        )));
    }
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_common_triples() {
        let p = |t| platform_of(t).map(|p| p.to_string());
        assert_eq!(
            p("x86_64-unknown-linux-gnu").as_deref(),
            Some("linux_amd64")
        );
        assert_eq!(p("aarch64-apple-darwin").as_deref(), Some("darwin_arm64"));
        assert_eq!(
            p("x86_64-pc-windows-msvc").as_deref(),
            Some("windows_amd64")
        );
        assert_eq!(
            p("armv7-unknown-linux-gnueabihf").as_deref(),
            Some("linux_arm")
        );
        assert_eq!(p("wasm32-unknown-unknown"), None);
    }

    #[test]
    fn plans_host_first_and_skips_duplicate_platforms() {
        let installed = vec![
            "x86_64-unknown-linux-gnu".to_owned(),
            "x86_64-unknown-linux-musl".to_owned(),
            "aarch64-unknown-linux-gnu".to_owned(),
            "wasm32-unknown-unknown".to_owned(),
        ];
        let all =
            plan_targets("x86_64-unknown-linux-gnu", &installed, TargetSelection::All).unwrap();
        let names: Vec<_> = all.iter().map(|t| t.triple.as_str()).collect();
        assert_eq!(
            names,
            ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"]
        );
        assert!(all[0].is_host);
        let host = plan_targets(
            "x86_64-unknown-linux-gnu",
            &installed,
            TargetSelection::Host,
        )
        .unwrap();
        assert_eq!(host.len(), 1);
    }

    #[test]
    fn profile_dirs() {
        assert_eq!(profile_dir("dev"), "debug");
        assert_eq!(profile_dir("release"), "release");
        assert_eq!(profile_dir("dist"), "dist");
    }
}
