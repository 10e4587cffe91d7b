//! Section 6: scale to zero. N Python hello functions (and a few Node ones)
//! on an operator of its own (strict isolation when run as root, as in
//! production): [`TF_FUNCTIONS`] of them through `terraform apply` (and a
//! timed `terraform plan` once they are at zero), the rest through the REST
//! API; left to scale to zero, then a random sample invoked cold (at zero →
//! answer, through the operator) and right after warm; against starting the
//! runtime server fresh by hand in the same run and against a function that
//! never scales down. Also the memory of everything sless runs with all N at
//! zero.

use std::path::Path;
use std::time::{Duration, Instant};

use super::coldstart::direct_start;
use super::error::{BenchError, Result};
use super::fixtures;
use super::operator::{Client, Operator};
use super::report::Report;
use super::scale::{Tf, header};
use super::stats;

const SECTION: &str = "6 scale to zero";
const BODY: &str = "{\"name\":\"bench\"}";
/// How long the benchmark's functions stay up after a request.
const IDLE_SEC: u64 = 2;
/// Functions deployed between waits (bounds how many run at once).
const BATCH: usize = 25;
/// Node functions (cold starts take the namespace's warm Node process).
const NODE_FUNCTIONS: usize = 10;
/// Functions of the N deployed through `terraform apply`.
const TF_FUNCTIONS: usize = 100;
/// Pause before each cold sample: cold starts arrive as independent
/// requests, not back to back (a warm Node process's replacement boots in
/// the meantime; see docs/performance.md section 6).
const COLD_SPACING: Duration = Duration::from_millis(300);

/// Sizes of one run.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Python functions deployed.
    pub functions: usize,
    /// How many of them are invoked cold.
    pub sample: usize,
    /// Fresh starts by hand (the baseline).
    pub direct_runs: usize,
}

/// Milliseconds of one invoke through the operator (fails unless 2xx).
fn timed_invoke(client: &Client, name: &str) -> Result<f64> {
    let t = Instant::now();
    client.invoke(name, BODY)?;
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Pids of `root` and every process below it.
fn tree(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

/// Polls every function until it reports `instances: 0`.
fn wait_all_at_zero(client: &Client, names: &[String], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut left: Vec<&String> = names.iter().collect();
    while !left.is_empty() {
        let mut still = Vec::new();
        for n in left {
            if client.get_function(n)?.status.instances != 0 {
                still.push(n);
            }
        }
        left = still;
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            return Err(BenchError::Timeout {
                what: format!("{} functions to scale to zero", left.len()),
                secs: timeout.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

/// Deploys `names` with `code` in batches, each batch waited for.
fn deploy(
    client: &Client,
    names: &[String],
    runtime: &str,
    entry: &str,
    code: &Path,
) -> Result<()> {
    let (zip, hash) = fixtures::package(code)?;
    for batch in names.chunks(BATCH) {
        for n in batch {
            client.create_function_with(
                n,
                runtime,
                entry,
                serde_json::json!({"idle_timeout_sec": IDLE_SEC}),
            )?;
            client.upload_code(n, &zip, &hash)?;
        }
        for n in batch {
            client.wait_ready(n, Duration::from_secs(300))?;
        }
    }
    Ok(())
}

/// What the Terraform part measured.
struct TfRun {
    apply_ms: f64,
    plan_ms: f64,
    plan_empty_ms: f64,
}

/// Applies `names` (Python hello functions from `code`, idling out after
/// [`IDLE_SEC`]) through terraform with the release provider; the plans are
/// timed by [`plan_at_zero`] once the functions are at zero.
fn terraform_apply(
    client: &Client,
    provider_bin: &Path,
    work: &Path,
    names: &[String],
    code: &Path,
) -> Result<(Tf, Tf, f64)> {
    let endpoint = format!("http://{}", client.addr);
    let token = client.auth.trim_start_matches("Bearer ").to_owned();
    let empty = Tf::new(&work.join("tf-empty"), provider_bin, &endpoint, &token)?;
    let main = empty.dir.join("main.tf");
    std::fs::write(&main, header()).map_err(super::error::io("write", &main))?;
    let tf = Tf::new(&work.join("tf"), provider_bin, &endpoint, &token)?;
    let mut hcl = header();
    hcl.push_str(&format!(
        "\nlocals {{\n  names = [{}]\n}}\n\nresource \"sless_function\" \"f\" {{\n  for_each         = toset(local.names)\n  name             = each.key\n  runtime          = \"python3.11\"\n  entrypoint       = \"main.handler\"\n  source_dir       = \"{}\"\n  idle_timeout_sec = {IDLE_SEC}\n}}\n",
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", "),
        code.display()
    ));
    let main = tf.dir.join("main.tf");
    std::fs::write(&main, hcl).map_err(super::error::io("write", &main))?;
    println!("  terraform apply with {} function(s)", names.len());
    let apply_ms = tf.ok(&["apply", "-auto-approve", "-input=false", "-no-color"])?;
    Ok((tf, empty, apply_ms))
}

/// `terraform plan` (no changes) of the applied functions, now at zero,
/// against the plan of an empty configuration.
fn plan_at_zero(tf: &Tf, empty: &Tf, apply_ms: f64) -> Result<TfRun> {
    Ok(TfRun {
        apply_ms,
        plan_ms: tf.plan_no_changes(3)?,
        plan_empty_ms: empty.plan_no_changes(3)?,
    })
}

/// Runs the section.
pub fn run(
    report: &mut Report,
    operator_bin: &Path,
    provider_bin: &Path,
    workspace: &Path,
    work: &Path,
    sizes: Sizes,
) -> Result<()> {
    let (isolation, extra) = super::operator::default_isolation();
    let py = work.join("code/zero-py");
    let node = work.join("code/zero-node");
    fixtures::python_hello(&py, "zero")?;
    fixtures::node_hello(&node)?;

    // Baselines first, on a quiet machine: the runtime servers started by hand.
    let mut fresh_py = Vec::new();
    let mut fresh_node = Vec::new();
    for _ in 0..sizes.direct_runs {
        let d = direct_start(workspace, "python", &py)?;
        fresh_py.push(d.ready_ms + d.first_ms);
        let d = direct_start(workspace, "node", &node)?;
        fresh_node.push(d.ready_ms + d.first_ms);
    }

    let op = Operator::start_with(operator_bin, &work.join("zero-data"), extra)?;
    std::thread::sleep(Duration::from_secs(1));
    let op_idle = stats::rss_mib(op.pid()).unwrap_or(f64::NAN);
    let client = op.client("bench-zero")?;

    let py_names: Vec<String> = (0..sizes.functions).map(|i| format!("z{i:04}")).collect();
    let node_names: Vec<String> = (0..NODE_FUNCTIONS).map(|i| format!("zn{i}")).collect();
    let tf_count = TF_FUNCTIONS.min(py_names.len() / 2);
    let (tf, tf_empty, apply_ms) = terraform_apply(
        &client,
        provider_bin,
        &work.join("zero-tf"),
        &py_names[..tf_count],
        &py,
    )?;
    let t = Instant::now();
    deploy(
        &client,
        &py_names[tf_count..],
        "python3.11",
        "main.handler",
        &py,
    )?;
    let deploy_secs = t.elapsed().as_secs_f64();
    deploy(&client, &node_names, "nodejs20", "index.handler", &node)?;
    // One that never scales down: the warm baseline.
    client.create_function_with(
        "always",
        "python3.11",
        "main.handler",
        serde_json::json!({"min_instances": 1}),
    )?;
    let (zip, hash) = fixtures::package(&py)?;
    client.upload_code("always", &zip, &hash)?;
    client.wait_ready("always", Duration::from_secs(120))?;

    let mut all = py_names.clone();
    all.extend(node_names.iter().cloned());
    wait_all_at_zero(&client, &all, Duration::from_secs(300))?;
    std::thread::sleep(Duration::from_secs(1));
    println!("  terraform plan with {tf_count} function(s) at zero");
    let tf_run = plan_at_zero(&tf, &tf_empty, apply_ms)?;

    // Memory with everything at zero (and the one `always` process).
    let pids = tree(op.pid());
    let always_pids: Vec<u32> = match client.process("always") {
        Ok((pid, _)) => tree(pid),
        Err(_) => Vec::new(),
    };
    let rss = |p: &u32| stats::rss_mib(*p).unwrap_or(0.0);
    let op_mib = stats::rss_mib(op.pid()).unwrap_or(f64::NAN);
    let zygote_mib: f64 = pids
        .iter()
        .filter(|p| cmdline(**p).contains("zygote.py"))
        .map(rss)
        .sum();
    let total_mib: f64 = pids
        .iter()
        .filter(|p| !always_pids.contains(p))
        .map(rss)
        .sum();

    // Cold, then warm right after, on a deterministic sample.
    let mut seed: u64 = 0x5eed;
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..sizes.sample.min(py_names.len()) {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let name = &py_names[(seed >> 33) as usize % py_names.len()];
        if client.get_function(name)?.status.instances != 0 {
            // Picked twice within its idle time: not a cold start.
            continue;
        }
        std::thread::sleep(COLD_SPACING);
        cold.push(timed_invoke(&client, name)?);
        // Warm: the median of the next five requests to the same process.
        let next: Vec<f64> = (0..5)
            .map(|_| timed_invoke(&client, name))
            .collect::<Result<_>>()?;
        warm.push(stats::median(&next).unwrap_or(f64::NAN));
    }
    let mut node_cold = Vec::new();
    for n in &node_names {
        std::thread::sleep(COLD_SPACING);
        node_cold.push(timed_invoke(&client, n)?);
    }
    // Back to back (no pause): each start waits for the previous one's
    // replacement warm process to boot. Recorded, not a target.
    wait_all_at_zero(&client, &node_names, Duration::from_secs(60))?;
    std::thread::sleep(Duration::from_secs(1));
    let mut node_burst = Vec::new();
    for n in &node_names {
        node_burst.push(timed_invoke(&client, n)?);
    }
    let mut always = Vec::new();
    for _ in 0..cold.len().max(20) {
        always.push(timed_invoke(&client, "always")?);
    }

    let fresh_py_ms = stats::median(&fresh_py).unwrap_or(f64::NAN);
    let fresh_node_ms = stats::median(&fresh_node).unwrap_or(f64::NAN);
    let n = sizes.functions;
    report.ratio(
        SECTION,
        "python cold start p50 (at zero → answer) vs fresh spawn by hand",
        percentile(&cold, 0.5),
        fresh_py_ms,
        "ms",
        &format!(
            "{} samples of {n}, isolation {isolation}; target ≤ 50 ms and ≤ 0.33×",
            cold.len()
        ),
    );
    report.ratio(
        SECTION,
        "python cold start p99 vs fresh spawn by hand",
        percentile(&cold, 0.99),
        fresh_py_ms,
        "ms",
        "fresh spawn: `python3 -u server.py` to READY, plus its first answer",
    );
    report.ratio(
        SECTION,
        "python warm invoke p50 (requests 2-6 after a cold start) vs a min_instances = 1 function",
        percentile(&warm, 0.5),
        percentile(&always, 0.5),
        "ms",
        "target ~1: a cold-started process serves like any other",
    );
    report.ratio(
        SECTION,
        "node cold start p50 vs fresh spawn by hand",
        percentile(&node_cold, 0.5),
        fresh_node_ms,
        "ms",
        &format!(
            "{NODE_FUNCTIONS} functions, {} ms apart, each taking the warm Node process; back to back p50 {:.1} ms; target ≤ 50 ms",
            COLD_SPACING.as_millis(),
            percentile(&node_burst, 0.5)
        ),
    );
    report.delta(
        SECTION,
        &format!(
            "terraform plan of {tf_count} functions at zero (no changes) vs plan of an empty config"
        ),
        tf_run.plan_ms,
        tf_run.plan_empty_ms,
        "ms",
        &format!(
            "median of 3; their terraform apply took {:.1} s",
            tf_run.apply_ms / 1000.0
        ),
    );
    report.delta(
        SECTION,
        &format!("RSS of the operator and every process it runs, {n} functions at zero, vs the idle operator"),
        total_mib,
        op_idle,
        "MiB",
        &format!("target ≤ 100 MiB in total; the operator alone {op_mib:.1} MiB, the zygote {zygote_mib:.1} MiB"),
    );
    report.raw(
        "scale_to_zero",
        serde_json::json!({
            "functions": n,
            "isolation": isolation,
            "deploy_secs": deploy_secs,
            "cold_ms": cold,
            "warm_ms": warm,
            "node_cold_ms": node_cold,
            "node_back_to_back_ms": node_burst,
            "terraform_functions": tf_count,
            "terraform_apply_ms": tf_run.apply_ms,
            "terraform_plan_ms": tf_run.plan_ms,
            "terraform_plan_empty_ms": tf_run.plan_empty_ms,
            "always_ms": always,
            "fresh_python_ms": fresh_py,
            "fresh_node_ms": fresh_node,
            "operator_idle_mib": op_idle,
            "operator_mib": op_mib,
            "zygote_mib": zygote_mib,
            "total_mib": total_mib,
        }),
    );
    println!(
        "  (6: {tf_count} functions applied in {:.0} s, {} more deployed through the API in {deploy_secs:.0} s; cold p50 {:.1} ms, fresh spawn {fresh_py_ms:.1} ms)",
        tf_run.apply_ms / 1000.0,
        n - tf_count,
        percentile(&cold, 0.5)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_pick_from_the_sorted_samples() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 0.99), 5.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
