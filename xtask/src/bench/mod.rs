//! `cargo xtask bench`: measures sless side by side with baselines from the same run
//! (invoke path, plan/apply at scale, source hashing, cold start, memory, scale
//! to zero) on
//! 127.0.0.1, prints a Markdown table and writes `results.json`. Figures are ratios
//! or deltas against their baselines, never bare times, and never asserted.

pub mod coldstart;
pub mod error;
pub mod fixtures;
pub mod hashing;
pub mod http;
pub mod invoke;
pub mod memory;
pub mod operator;
pub mod profile;
pub mod report;
pub mod scale;
pub mod stats;
pub mod wrk;
pub mod zero;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use error::{BenchError, Result};
use report::{Machine, Report};

/// What `cargo xtask bench` was asked to do.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Fewer sizes and shorter loads (under ~3 minutes).
    pub quick: bool,
    /// Output folder (`results.json` and every generated input).
    pub out: PathBuf,
    /// The workspace root.
    pub workspace: PathBuf,
    /// Skip `cargo build --release` (binaries already built).
    pub no_build: bool,
    /// Only this section (1 and 4 run together: 1 invokes what 4 deployed).
    pub only: Option<u8>,
}

fn tool_present(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// Builds the release binaries and runs every section. Returns the report; it has
/// failures when any part of the run went wrong (the caller exits non-zero).
pub fn run(opts: &BenchOptions) -> Result<Report> {
    let started = Instant::now();
    wrk::ensure_installed()?;
    for tool in ["terraform", "python3", "node", "openssl", "sha256sum"] {
        if !tool_present(tool) {
            return Err(BenchError::MissingTool {
                tool,
                hint: "scripts/test.sh installs what the project needs".to_owned(),
            });
        }
    }
    if !opts.no_build {
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo.current_dir(&opts.workspace).args([
            "build",
            "--release",
            "-p",
            "sless-operator",
            "-p",
            "terraform-provider-sless",
            "-p",
            "xtask",
        ]);
        crate::cmd::run_inherited(&mut cargo)?;
    }
    let release = target_dir(&opts.workspace).join("release");
    let operator_bin = release.join("sless-operator");
    let provider_bin = release.join("terraform-provider-sless");
    let xtask_bin = release.join("xtask");
    std::fs::create_dir_all(&opts.out).map_err(error::io("create", &opts.out))?;
    let out = opts
        .out
        .canonicalize()
        .map_err(error::io("resolve", &opts.out))?;

    let mut report = Report {
        machine: Machine::probe(),
        quick: opts.quick,
        ..Report::default()
    };
    println!(
        "{}",
        report
            .table()
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
    );

    let want = |n: u8| opts.only.is_none_or(|o| o == n);
    if want(3)
        && let Err(e) = hashing::run(&mut report, &xtask_bin, &out)
    {
        report.fail(format!("3 hashing: {e}"));
    }

    let load = wrk::Load {
        threads: 1,
        connections: 8,
        duration_secs: if opts.quick { 3 } else { 10 },
    };
    if want(1)
        && let Err(e) = invoke::run(&mut report, &operator_bin, &opts.workspace, &out, load)
    {
        report.fail(format!("1 invoke: {e}"));
    }

    if want(2) || want(4) || want(5) {
        let op = operator::Operator::start(&operator_bin, &out.join("operator-data"))?;
        std::thread::sleep(Duration::from_secs(1));
        let idle_mib = memory::operator_rss(&op)?;
        let client = op.client("bench")?;

        if want(4)
            && let Err(e) = coldstart::run(&mut report, &client, &opts.workspace, &out)
        {
            report.fail(format!("4 cold start: {e}"));
        }

        let sizes: &[usize] = if opts.quick { &[1, 10] } else { &[1, 10, 50] };
        let plan_runs = if opts.quick { 1 } else { 3 };
        match op.client("bench-tf") {
            _ if !want(2) => {}
            Ok(tf_client) => {
                if let Err(e) = scale::run(
                    &mut report,
                    &tf_client,
                    &provider_bin,
                    &out.join("tf"),
                    sizes,
                    plan_runs,
                ) {
                    report.fail(format!("2 plan/apply: {e}"));
                }
            }
            Err(e) => report.fail(format!("2 plan/apply: {e}")),
        }

        match op.client("bench-mem") {
            _ if !want(5) => {}
            Ok(mem_client) => {
                if let Err(e) = memory::run(&mut report, &op, &mem_client, idle_mib) {
                    report.fail(format!("5 memory: {e}"));
                }
            }
            Err(e) => report.fail(format!("5 memory: {e}")),
        }
        drop(op);
    }

    let zero_sizes = if opts.quick {
        zero::Sizes {
            functions: 100,
            sample: 30,
            direct_runs: 3,
        }
    } else {
        zero::Sizes {
            functions: 1000,
            sample: 100,
            direct_runs: 5,
        }
    };
    if want(6)
        && let Err(e) = zero::run(
            &mut report,
            &operator_bin,
            &provider_bin,
            &opts.workspace,
            &out,
            zero_sizes,
        )
    {
        report.fail(format!("6 scale to zero: {e}"));
    }

    if want(7)
        && let Err(e) = profile::run(&mut report, &operator_bin, &out, opts.quick)
    {
        report.fail(format!("7 proxy instructions: {e}"));
    }

    report.machine.loadavg_end = report::loadavg();
    report.raw("wall_secs", started.elapsed().as_secs_f64());
    report.write_json(&out)?;
    let m = &report.machine;
    println!(
        "\nmachine: {} CPUs ({}), {} MiB RAM; load average at start {}, at end {}\n",
        m.cpus, m.cpu_model, m.mem_total_mib, m.loadavg_start, m.loadavg_end
    );
    println!("{}", report.table());
    println!("results: {}", out.join("results.json").display());
    Ok(report)
}

/// `CARGO_TARGET_DIR` or `<workspace>/target`.
pub fn target_dir(workspace: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                workspace.join(d)
            }
        }
        None => workspace.join("target"),
    }
}

/// The `bench` subcommand: runs, prints, and maps the outcome to an exit status
/// (1 when the run had failures or could not run).
pub fn cli(
    quick: bool,
    out: PathBuf,
    no_build: bool,
    only: Option<u8>,
    workspace: PathBuf,
) -> std::process::ExitCode {
    let out = if out.is_absolute() {
        out
    } else {
        std::env::current_dir().map(|d| d.join(&out)).unwrap_or(out)
    };
    let opts = BenchOptions {
        quick,
        out,
        workspace,
        no_build,
        only,
    };
    match run(&opts) {
        Ok(r) if r.failures.is_empty() => std::process::ExitCode::SUCCESS,
        Ok(r) => {
            eprintln!("\nthe run had {} failure(s):", r.failures.len());
            for f in &r.failures {
                eprintln!("  - {f}");
            }
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The hidden `bench-hash-worker DIR` subcommand: prints [`hashing::WorkerTimes`] as JSON.
pub fn hash_worker_cli(dir: &Path) -> std::process::ExitCode {
    match hashing::worker(dir) {
        Ok(t) => {
            println!("{}", serde_json::to_string(&t).unwrap_or_default());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
