//! `cargo xtask`: project automation. `cargo xtask release --help` for the release command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xtask::build::TargetSelection;
use xtask::registry::Platform;
use xtask::release::{self, ReleaseOptions};

/// Project automation for sless.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build, zip, checksum and sign the provider, and publish it into a static
    /// Terraform registry tree (Provider Registry Protocol v1), then verify the result.
    Release(Box<ReleaseArgs>),
    /// Benchmark sless against same-run baselines (see docs/performance.md).
    Bench(BenchArgs),
    /// Internal: time the provider's hash+zip path over DIR (used by `bench`).
    #[command(hide = true)]
    BenchHashWorker {
        /// The folder to read.
        dir: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// Shorter run (under ~3 minutes): N = 1 and 10 only, 3 s loads, one plan each.
    #[arg(long)]
    quick: bool,
    /// Output folder for results.json and generated inputs.
    #[arg(long, default_value = "build/bench")]
    out: PathBuf,
    /// Use the release binaries already in the target dir.
    #[arg(long)]
    no_build: bool,
    /// Run only this section (1-7; 1 and 4 run together).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=7))]
    only: Option<u8>,
}

#[derive(Debug, clap::Args)]
struct ReleaseArgs {
    /// Version to publish, e.g. 0.1.0 (no leading `v`).
    #[arg(long)]
    version: String,
    /// Registry namespace: users write `source = "HOST/NAMESPACE/sless"`.
    #[arg(long)]
    namespace: String,
    /// GPG key to sign with (fingerprint, key id or user id); must be RSA.
    #[arg(long)]
    gpg_key: String,
    /// GnuPG home directory (default: $GNUPGHOME or ~/.gnupg).
    #[arg(long)]
    gnupg_home: Option<PathBuf>,
    /// Root of the static registry tree to create or merge into.
    #[arg(long, default_value = "build/registry")]
    out: PathBuf,
    /// Build only the host, or also every other installed rustup target.
    #[arg(long, value_enum, default_value_t = TargetSelection::All)]
    targets: TargetSelection,
    /// Also write a packed filesystem mirror (MIRROR/HOST/NAMESPACE/sless/*.zip); needs --host.
    #[arg(long)]
    mirror: Option<PathBuf>,
    /// Registry host users write in `source` (for --mirror), e.g. registry.example.com.
    #[arg(long)]
    host: Option<String>,
    /// Cargo profile to build the provider with.
    #[arg(long, default_value = "release")]
    cargo_profile: String,
    /// Workspace root (default: the one xtask was built from).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Package an already built binary instead of building, as OS_ARCH=PATH (repeatable).
    /// The binary must have been built with SLESS_PROVIDER_VERSION set to --version.
    #[arg(long = "binary", value_parser = parse_binary)]
    binaries: Vec<(Platform, PathBuf)>,
}

fn parse_binary(s: &str) -> Result<(Platform, PathBuf), String> {
    let (plat, path) = s.split_once('=').ok_or_else(|| {
        "expected OS_ARCH=PATH, e.g. linux_amd64=target/release/terraform-provider-sless".to_owned()
    })?;
    let (os, arch) = plat
        .split_once('_')
        .filter(|(o, a)| !o.is_empty() && !a.is_empty())
        .ok_or_else(|| format!("`{plat}` is not OS_ARCH, e.g. linux_amd64"))?;
    Ok((
        Platform {
            os: os.to_owned(),
            arch: arch.to_owned(),
        },
        PathBuf::from(path),
    ))
}

fn default_workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(a) => {
            xtask::bench::cli(a.quick, a.out, a.no_build, a.only, default_workspace())
        }
        Command::BenchHashWorker { dir } => xtask::bench::hash_worker_cli(&dir),
        Command::Release(a) => {
            let a = *a;
            let workspace = a.workspace.unwrap_or_else(default_workspace);
            let out = if a.out.is_absolute() {
                a.out
            } else {
                std::env::current_dir()
                    .map(|d| d.join(&a.out))
                    .unwrap_or(a.out)
            };
            let opts = ReleaseOptions {
                version: a.version,
                namespace: a.namespace,
                gpg_key: a.gpg_key,
                gnupg_home: a.gnupg_home,
                out,
                targets: a.targets,
                mirror: a.mirror,
                host: a.host,
                cargo_profile: a.cargo_profile,
                workspace,
                prebuilt: a.binaries,
            };
            match release::run(&opts) {
                Ok(s) => {
                    let plats: Vec<String> = s.platforms.iter().map(|p| p.to_string()).collect();
                    println!(
                        "released terraform-provider-sless {} for {} signed by key {}",
                        s.version,
                        plats.join(", "),
                        s.key_id
                    );
                    println!("artifacts: {}", s.version_dir.display());
                    println!("registry tree: {}", opts.out.display());
                    if let Some(m) = &s.mirror_dir {
                        println!("filesystem mirror: {}", m.display());
                    }
                    println!(
                        "verified: {} package(s), {} signature(s) with the advertised key",
                        s.verified_packages, s.verified_signatures
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
