//! Section 5: the operator's RSS idle and with 100 registered functions (created
//! without code, so no runtime process exists; operator process only).

use std::time::Duration;

use super::error::{BenchError, Result};
use super::operator::{Client, Operator};
use super::report::Report;
use super::stats;

const SECTION: &str = "5 memory";

/// Number of functions registered for the "loaded" figure.
pub const FUNCTIONS: usize = 100;

/// The operator's RSS in MiB now.
pub fn operator_rss(op: &Operator) -> Result<f64> {
    stats::rss_mib(op.pid())
        .ok_or_else(|| BenchError::RunFailed(format!("cannot read /proc/{}/status", op.pid())))
}

/// Registers [`FUNCTIONS`] functions, measures, then deletes them again.
pub fn run(report: &mut Report, op: &Operator, client: &Client, idle_mib: f64) -> Result<()> {
    for i in 0..FUNCTIONS {
        client.create_function(&format!("mem-{i:03}"), "python3.11", "main.handler")?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let loaded = operator_rss(op)?;
    let per_fn_kib = (loaded - idle_mib) * 1024.0 / FUNCTIONS as f64;
    report.delta(
        SECTION,
        &format!("operator RSS with {FUNCTIONS} functions vs idle"),
        loaded,
        idle_mib,
        "MiB",
        &format!("{per_fn_kib:.0} KiB per registered function"),
    );
    report.raw(
        "memory",
        serde_json::json!({"operator_idle_mib": idle_mib, "operator_100_functions_mib": loaded, "per_function_kib": per_fn_kib}),
    );
    for i in 0..FUNCTIONS {
        client.delete_function(&format!("mem-{i:03}"))?;
    }
    Ok(())
}
