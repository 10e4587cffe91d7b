//! Section 3: the provider's hash and hash+zip path over big and tiny-file trees,
//! against `sha256sum` and `openssl dgst -sha256` over the same files.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use terraform_provider_sless::source::Snapshot;

use super::error::{BenchError, Result};
use super::fixtures::{self, TreeSize};
use super::report::Report;
use super::stats;

const SECTION: &str = "3 hashing";

/// Timings the release-built worker measured in-process (seconds).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerTimes {
    /// Bytes of file content the snapshot read.
    pub bytes: u64,
    /// Files in the snapshot.
    pub files: usize,
    /// `Snapshot::read` + `hash` (what `terraform plan` does), first run.
    pub hash_first_s: f64,
    /// The same on the unchanged tree right after.
    pub hash_second_s: f64,
    /// `Snapshot::read` + `hash` + `zip` + sha256 of the zip (what `terraform apply` does).
    pub hash_zip_s: f64,
}

/// The worker: runs the provider's code path over `dir` and returns its timings.
/// Called in a release build (`xtask bench-hash-worker DIR`) so the figures are
/// those of the shipped provider.
pub fn worker(dir: &Path) -> Result<WorkerTimes> {
    let err = |source| BenchError::Source {
        path: dir.to_owned(),
        source,
    };
    let t = Instant::now();
    let snap = Snapshot::read(dir).map_err(err)?;
    let _ = snap.hash();
    let hash_first_s = t.elapsed().as_secs_f64();
    drop(snap);
    let t = Instant::now();
    let snap = Snapshot::read(dir).map_err(err)?;
    let _ = snap.hash();
    let hash_second_s = t.elapsed().as_secs_f64();
    drop(snap);
    let t = Instant::now();
    let snap = Snapshot::read(dir).map_err(err)?;
    let _ = snap.hash();
    let zip = snap.zip().map_err(err)?;
    let _ = terraform_provider_sless::source::sha256_hex(&zip);
    let hash_zip_s = t.elapsed().as_secs_f64();
    let bytes = snap.files.iter().map(|f| f.content.len() as u64).sum();
    let files = snap.files.len();
    drop(zip);
    Ok(WorkerTimes {
        bytes,
        files,
        hash_first_s,
        hash_second_s,
        hash_zip_s,
    })
}

/// Seconds a shell pipeline takes (median of `runs`).
fn time_shell(script: &str, runs: usize) -> Result<f64> {
    let mut samples = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        crate::cmd::output(Command::new("sh").args(["-c", script]))?;
        samples.push(t.elapsed().as_secs_f64());
    }
    Ok(stats::median(&samples).unwrap_or(f64::NAN))
}

/// Runs the section: generates the trees under `work` and measures.
pub fn run(report: &mut Report, xtask_bin: &Path, work: &Path) -> Result<()> {
    let big = work.join("tree-big");
    let tiny = work.join("tree-tiny");
    println!("generating {} and {}", big.display(), tiny.display());
    let big_size = fixtures::big_tree(&big, 2_000, 100 * 1024 * 1024)?;
    let tiny_size = fixtures::tiny_tree(&tiny, 20_000)?;
    for (label, dir, size) in [("big", &big, big_size), ("tiny", &tiny, tiny_size)] {
        measure(report, xtask_bin, label, dir, size)?;
    }
    Ok(())
}

fn measure(
    report: &mut Report,
    xtask_bin: &Path,
    label: &str,
    dir: &Path,
    size: TreeSize,
) -> Result<()> {
    let quoted = dir.display().to_string().replace('\'', "'\\''");
    let find = format!("cd '{quoted}' && find . -type f -print0 | sort -z | xargs -0");
    let sha256sum = time_shell(&format!("{find} sha256sum > /dev/null"), 3)?;
    let openssl = time_shell(&format!("{find} openssl dgst -sha256 > /dev/null"), 3)?;
    let out = crate::cmd::stdout_text(Command::new(xtask_bin).arg("bench-hash-worker").arg(dir))?;
    let w: WorkerTimes = serde_json::from_str(&out).map_err(|e| BenchError::Parse {
        tool: "bench-hash-worker",
        reason: format!("{e}: {out}"),
    })?;
    if w.bytes != size.bytes || w.files != size.files {
        return Err(BenchError::RunFailed(format!(
            "the provider read {} files / {} bytes of the {label} tree, the generator wrote {} / {}",
            w.files, w.bytes, size.files, size.bytes
        )));
    }
    let mb = w.bytes as f64 / 1e6;
    let tp = |s: f64| mb / s;
    let what = format!("{label} tree ({} files, {:.0} MB)", w.files, mb);
    report.raw(
        &format!("hashing_{label}"),
        serde_json::json!({"worker": w, "sha256sum_s": sha256sum, "openssl_s": openssl}),
    );
    report.ratio(
        SECTION,
        &format!("{what}: provider hash vs sha256sum"),
        tp(w.hash_first_s),
        tp(sha256sum),
        "MB/s",
        "throughput ratio; >1 = provider faster",
    );
    report.ratio(
        SECTION,
        &format!("{what}: provider hash vs openssl dgst -sha256"),
        tp(w.hash_first_s),
        tp(openssl),
        "MB/s",
        "throughput ratio against the practical limit (SHA instructions)",
    );
    report.ratio(
        SECTION,
        &format!("{what}: provider hash+zip vs sha256sum"),
        tp(w.hash_zip_s),
        tp(sha256sum),
        "MB/s",
        "the apply path (read, hash, deflate) against hashing alone",
    );
    report.ratio(
        SECTION,
        &format!("{what}: unchanged tree, 2nd hash vs 1st"),
        w.hash_second_s * 1000.0,
        w.hash_first_s * 1000.0,
        "ms",
        "time ratio; ~1 = no cache (none exists)",
    );
    Ok(())
}
