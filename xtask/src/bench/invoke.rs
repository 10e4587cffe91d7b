//! Section 1: the invoke path under load (`wrk`), (a) straight to the function's
//! process, (b) through the authenticated invoke endpoint, (c) through an http
//! trigger's public URL.

use std::path::Path;
use std::time::{Duration, Instant};

use super::coldstart::Deployed;
use super::error::{BenchError, Result};
use super::http;
use super::operator::Client;
use super::report::Report;
use super::wrk::{self, Load, WrkResult};

const SECTION: &str = "1 invoke";
const BODY: &str = "{\"name\":\"bench\"}";

/// Runs wrk and records a failure for error answers; returns the result either way.
fn load(report: &mut Report, what: &str, url: &str, script: &Path, l: Load) -> Result<WrkResult> {
    println!("wrk {what}: {url}");
    let r = wrk::run(url, script, l)?;
    if let Some(f) = r.failure() {
        report.fail(format!("{SECTION}: {what}: {f}"));
    }
    Ok(r)
}

/// Waits until a public path answers 2xx (the trigger is live; also section 7).
pub(super) fn wait_public(addr: &str, path: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = http::request(
            addr,
            "POST",
            path,
            &[("Content-Type", "application/json")],
            BODY.as_bytes(),
        )?;
        if r.is_success() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::RunFailed(format!(
                "trigger {path} still answers {} after 30s: {}",
                r.status,
                r.text()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs the section over the given functions.
pub fn run(
    report: &mut Report,
    client: &Client,
    functions: &[Deployed],
    work: &Path,
    l: Load,
) -> Result<()> {
    wrk::ensure_installed()?;
    std::fs::create_dir_all(work).map_err(super::error::io("create", work))?;
    let (plain, authed) = wrk::post_scripts(work, BODY, &client.auth)?;
    let mut raw = serde_json::Map::new();
    for f in functions {
        let (_, port) = client.process(&f.name)?;
        let direct_url = format!("http://127.0.0.1:{port}/");
        let invoke_url = format!("http://{}{}", client.addr, client.invoke_path(&f.name));
        let lang = f.language;
        let a = load(
            report,
            &format!("{lang} (a) direct"),
            &direct_url,
            &plain,
            l,
        )?;
        let b = load(
            report,
            &format!("{lang} (b) invoke endpoint"),
            &invoke_url,
            &authed,
            l,
        )?;
        report.ratio(
            SECTION,
            &format!("{lang}: throughput (b) invoke endpoint / (a) direct"),
            b.rps,
            a.rps,
            "req/s",
            "throughput ratio; 1 = no proxy cost",
        );
        report.delta(
            SECTION,
            &format!("{lang}: p50 (b) invoke endpoint vs (a) direct"),
            b.p50_ms,
            a.p50_ms,
            "ms",
            "added median latency",
        );
        report.delta(
            SECTION,
            &format!("{lang}: p99 (b) invoke endpoint vs (a) direct"),
            b.p99_ms,
            a.p99_ms,
            "ms",
            "added tail latency",
        );
        raw.insert(
            format!("{lang}_a_direct"),
            serde_json::to_value(&a).unwrap_or_default(),
        );
        raw.insert(
            format!("{lang}_b_invoke"),
            serde_json::to_value(&b).unwrap_or_default(),
        );
        let trigger = format!("{}-http", f.name);
        match client.create_http_trigger(&trigger, &f.name) {
            Ok(path) => {
                wait_public(&client.addr, &path)?;
                let url = format!("http://{}{}", client.addr, path);
                let c = load(report, &format!("{lang} (c) http trigger"), &url, &plain, l)?;
                report.ratio(
                    SECTION,
                    &format!("{lang}: throughput (c) http trigger / (a) direct"),
                    c.rps,
                    a.rps,
                    "req/s",
                    "throughput ratio; 1 = no proxy cost",
                );
                report.delta(
                    SECTION,
                    &format!("{lang}: p50 (c) http trigger vs (a) direct"),
                    c.p50_ms,
                    a.p50_ms,
                    "ms",
                    "added median latency",
                );
                report.delta(
                    SECTION,
                    &format!("{lang}: p99 (c) http trigger vs (a) direct"),
                    c.p99_ms,
                    a.p99_ms,
                    "ms",
                    "added tail latency",
                );
                raw.insert(
                    format!("{lang}_c_trigger"),
                    serde_json::to_value(&c).unwrap_or_default(),
                );
            }
            Err(e) => {
                println!("(c) http trigger not available: {e}");
                raw.insert(
                    format!("{lang}_c_trigger"),
                    serde_json::Value::String(format!("not available: {e}")),
                );
            }
        }
    }
    raw.insert("load".into(), serde_json::to_value(l).unwrap_or_default());
    report.raw("invoke", raw);
    Ok(())
}
