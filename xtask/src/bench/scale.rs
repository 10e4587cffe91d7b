//! Section 2: `terraform apply` and `terraform plan` over N small Python functions with
//! the release provider (through `dev_overrides`, with an isolated HOME and CLI config),
//! against the plan of an empty configuration and the build+start time the operator
//! recorded for each function.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use super::error::{BenchError, Result, io};
use super::fixtures;
use super::operator::Client;
use super::report::Report;
use super::stats;

const SECTION: &str = "2 plan/apply";
const SOURCE: &str = "sless.example/sless/sless";

/// An isolated Terraform working directory (also used by section 6).
pub(super) struct Tf {
    /// Where `main.tf` goes and terraform runs.
    pub dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Tf {
    pub fn new(root: &Path, provider_bin: &Path, endpoint: &str, token: &str) -> Result<Tf> {
        fixtures::fresh_dir(root)?;
        let plugins = root.join("plugins");
        let home = root.join("home");
        let dir = root.join("work");
        for d in [&plugins, &home, &dir] {
            std::fs::create_dir_all(d).map_err(io("create", d))?;
        }
        let link = plugins.join("terraform-provider-sless");
        std::os::unix::fs::symlink(provider_bin, &link).map_err(io("link", &link))?;
        let rc = root.join("cli.tfrc");
        let rc_text = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"{SOURCE}\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            plugins.display()
        );
        std::fs::write(&rc, rc_text).map_err(io("write", &rc))?;
        let env = vec![
            ("TF_CLI_CONFIG_FILE".into(), rc.display().to_string()),
            ("CHECKPOINT_DISABLE".into(), "1".into()),
            ("TF_IN_AUTOMATION".into(), "1".into()),
            ("HOME".into(), home.display().to_string()),
            ("SLESS_ENDPOINT".into(), endpoint.to_owned()),
            ("SLESS_TOKEN".into(), token.to_owned()),
        ];
        Ok(Tf { dir, env })
    }

    /// Runs terraform; returns its output and wall time in ms.
    fn run(&self, args: &[&str]) -> Result<(Output, f64)> {
        let t = Instant::now();
        let out = Command::new("terraform")
            .args(args)
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("TF_LOG")
            .stdin(Stdio::null())
            .output()
            .map_err(|source| crate::Error::Spawn {
                program: "terraform".into(),
                source,
            })?;
        Ok((out, t.elapsed().as_secs_f64() * 1000.0))
    }

    pub fn ok(&self, args: &[&str]) -> Result<f64> {
        let (out, ms) = self.run(args)?;
        if !out.status.success() {
            return Err(BenchError::RunFailed(format!(
                "terraform {} failed:\n{}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(ms)
    }

    /// `terraform plan -detailed-exitcode`, median wall ms of `runs`; a plan with
    /// changes is a failure.
    pub fn plan_no_changes(&self, runs: usize) -> Result<f64> {
        let mut samples = Vec::new();
        for _ in 0..runs {
            let (out, ms) = self.run(&[
                "plan",
                "-input=false",
                "-no-color",
                "-detailed-exitcode",
                "-lock=false",
            ])?;
            if out.status.code() != Some(0) {
                return Err(BenchError::RunFailed(format!(
                    "terraform plan in {} was not empty (exit {:?}):\n{}{}",
                    self.dir.display(),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            samples.push(ms);
        }
        Ok(stats::median(&samples).unwrap_or(f64::NAN))
    }
}

/// The `terraform` and `provider` blocks of a bench configuration.
pub(super) fn header() -> String {
    format!(
        "terraform {{\n  required_providers {{\n    sless = {{\n      source = \"{SOURCE}\"\n    }}\n  }}\n}}\n\nprovider \"sless\" {{\n  wait_timeout_sec = 600\n}}\n"
    )
}

/// Seconds from the build log's `=== build of … at T` line to `last_built_at`
/// (Ready), both whole-second RFC 3339 times recorded by the operator.
pub fn build_plus_start_secs(build_log: &str, last_built_at: &str) -> Option<f64> {
    let start = build_log
        .lines()
        .rev()
        .find(|l| l.starts_with("=== build of"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(stats::parse_rfc3339_utc)?;
    let ready = stats::parse_rfc3339_utc(last_built_at)?;
    Some(ready - start)
}

/// Runs the section for every N in `sizes`.
pub fn run(
    report: &mut Report,
    client: &Client,
    provider_bin: &Path,
    work: &Path,
    sizes: &[usize],
    plan_runs: usize,
) -> Result<()> {
    let endpoint = format!("http://{}", client.addr);
    let token = client.auth.trim_start_matches("Bearer ").to_owned();
    let empty = Tf::new(&work.join("empty"), provider_bin, &endpoint, &token)?;
    let main = empty.dir.join("main.tf");
    std::fs::write(&main, header()).map_err(io("write", &main))?;
    let plan_empty = empty.plan_no_changes(plan_runs)?;
    let mut raw = serde_json::Map::new();
    raw.insert("plan_empty_ms".into(), plan_empty.into());
    for &n in sizes {
        let tf = Tf::new(&work.join(format!("n{n}")), provider_bin, &endpoint, &token)?;
        let mut hcl = header();
        for i in 0..n {
            let src = tf.dir.join(format!("src/f{i}"));
            fixtures::python_hello(&src, &format!("f{i}"))?;
            hcl.push_str(&format!(
                "\nresource \"sless_function\" \"f{i}\" {{\n  name       = \"bench-n{n}-f{i}\"\n  runtime    = \"python3.11\"\n  entrypoint = \"main.handler\"\n  source_dir = \"${{path.module}}/src/f{i}\"\n}}\n"
            ));
        }
        let main = tf.dir.join("main.tf");
        std::fs::write(&main, hcl).map_err(io("write", &main))?;
        println!("terraform apply with {n} function(s)");
        let apply_ms = tf.ok(&["apply", "-auto-approve", "-input=false", "-no-color"])?;
        let mut work_s = 0.0;
        for i in 0..n {
            let name = format!("bench-n{n}-f{i}");
            let f = client.get_function(&name)?;
            if f.status.phase != sless_wire::function::Phase::Ready {
                return Err(BenchError::RunFailed(format!(
                    "{name} is {:?} after apply",
                    f.status.phase
                )));
            }
            let log = client.build_log(&name)?;
            let built = f.status.last_built_at.unwrap_or_default();
            work_s += build_plus_start_secs(&log, &built).ok_or_else(|| BenchError::Parse {
                tool: "build log",
                reason: format!("no `=== build of … at T` line or last_built_at for {name}"),
            })?;
        }
        println!("terraform plan with {n} function(s)");
        let plan_ms = tf.plan_no_changes(plan_runs)?;
        let overhead = stats::per_item(plan_ms, plan_empty, n).unwrap_or(f64::NAN);
        report.delta(
            SECTION,
            &format!("N={n}: plan (no changes) vs plan of empty config"),
            plan_ms,
            plan_empty,
            "ms",
            "Terraform's own floor as baseline",
        );
        report.ratio(
            SECTION,
            &format!("N={n}: per-resource plan overhead"),
            overhead,
            plan_empty,
            "ms",
            "(plan(N) − plan(empty)) / N, ratio against the empty plan",
        );
        report.ratio(SECTION, &format!("N={n}: apply overlap = Σ(build+start) / apply wall"), work_s * 1000.0, apply_ms, "ms", "Σ per-function build start (build log) → Ready (last_built_at), 1 s resolution; >1 = work overlapped");
        raw.insert(
            format!("n{n}"),
            serde_json::json!({"apply_ms": apply_ms, "plan_ms": plan_ms, "sum_build_start_ms": work_s * 1000.0}),
        );
        println!("terraform destroy with {n} function(s)");
        let destroy_ms = tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"])?;
        if let Some(v) = raw.get_mut(&format!("n{n}")) {
            v["destroy_ms"] = destroy_ms.into();
        }
    }
    report.raw("plan_apply", raw);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn build_plus_start_is_read_from_the_last_build_line() {
        let log = "=== build of ns/f code abc for python3.11 at 2026-12-02T14:00:00Z\nno deps\n=== build of ns/f code def for python3.11 at 2026-12-02T14:10:00Z\nstarting\n";
        assert_eq!(
            super::build_plus_start_secs(log, "2026-12-02T14:10:02Z"),
            Some(2.0)
        );
        assert_eq!(
            super::build_plus_start_secs("nothing", "2026-12-02T14:10:02Z"),
            None
        );
    }
}
