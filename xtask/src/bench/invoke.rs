//! Section 1: the invoke path under load (`wrk`), (a) straight to the runtime
//! server started by hand on loopback TCP with the same code, (b) through the
//! authenticated invoke endpoint, (c) through an http trigger's public URL.
//! (b) and (c) run on an operator of the section's own with the isolation
//! users get by default (strict: the function sandboxed, reached over its unix
//! socket) when run as root, `--isolation none` otherwise. Around each load it
//! also reads the CPU time the operator and the function's processes used
//! (`/proc/<pid>/stat`, user and system apart), per request answered: the
//! proxy's cost in CPU, kernel work for its sockets included, which
//! callgrind's instruction counts (section 7) do not see.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::coldstart::{self, DirectServer};
use super::error::{BenchError, Result};
use super::fixtures;
use super::http;
use super::operator::{Client, Operator};
use super::report::Report;
use super::stats::{self, CpuTicks};
use super::wrk::{self, Load, WrkResult};

const SECTION: &str = "1 invoke";
const BODY: &str = "{\"name\":\"bench\"}";

/// The processes whose CPU time is read around each load: the operator's
/// own, and the function's process tree (the sandbox's processes included).
#[derive(Debug, Clone, Copy)]
struct Watched {
    operator: u32,
    function: u32,
    ticks_per_second: f64,
}

/// CPU time per answered request of one load, in microseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct CpuPerRequest {
    operator_user_us: f64,
    operator_system_us: f64,
    function_user_us: f64,
    function_system_us: f64,
}

impl CpuPerRequest {
    fn operator_us(&self) -> f64 {
        self.operator_user_us + self.operator_system_us
    }
    fn function_us(&self) -> f64 {
        self.function_user_us + self.function_system_us
    }
}

/// One load's wrk figures and CPU time.
#[derive(Debug, serde::Serialize)]
struct Measured {
    #[serde(flatten)]
    wrk: WrkResult,
    cpu: CpuPerRequest,
}

/// Runs wrk and records a failure for error answers; returns the result
/// either way, with the CPU time the watched processes used meanwhile.
fn load(
    report: &mut Report,
    what: &str,
    url: &str,
    script: &Path,
    l: Load,
    watched: Watched,
) -> Result<Measured> {
    println!("wrk {what}: {url}");
    let gone = |pid: u32| BenchError::RunFailed(format!("cannot read /proc/{pid}/stat"));
    let ticks = |w: Watched| -> Result<(CpuTicks, CpuTicks)> {
        Ok((
            stats::cpu_ticks(w.operator).ok_or_else(|| gone(w.operator))?,
            stats::tree_cpu_ticks(w.function).ok_or_else(|| gone(w.function))?,
        ))
    };
    let (op0, fn0) = ticks(watched)?;
    let r = wrk::run(url, script, l)?;
    let (op1, fn1) = ticks(watched)?;
    if let Some(f) = r.failure() {
        report.fail(format!("{SECTION}: {what}: {f}"));
    }
    let per_request = |t: CpuTicks| {
        let us = |n: u64| n as f64 * 1e6 / watched.ticks_per_second / (r.requests.max(1) as f64);
        (us(t.user), us(t.system))
    };
    let (operator_user_us, operator_system_us) = per_request(op1.since(op0));
    let (function_user_us, function_system_us) = per_request(fn1.since(fn0));
    let cpu = CpuPerRequest {
        operator_user_us,
        operator_system_us,
        function_user_us,
        function_system_us,
    };
    println!(
        "  CPU per request: operator {:.1} µs (user {:.1}, system {:.1}), function {:.1} µs",
        cpu.operator_us(),
        operator_user_us,
        operator_system_us,
        cpu.function_us()
    );
    Ok(Measured { wrk: r, cpu })
}

/// Reports the operator's CPU per request of `via` against the function's
/// own CPU per request when called directly.
fn report_cpu(report: &mut Report, lang: &str, via: &str, m: &Measured, direct: &Measured) {
    report.ratio(
        SECTION,
        &format!("{lang}: operator CPU per request {via} vs the function's own (a) direct"),
        m.cpu.operator_us(),
        direct.cpu.function_us(),
        "µs",
        &format!(
            "user + system (of which system {:.1} µs); the proxy's whole cost in CPU",
            m.cpu.operator_system_us
        ),
    );
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

/// A hello function of one language, deployed on the section's operator,
/// and the same code served by hand.
struct Subject {
    language: &'static str,
    name: String,
    direct: DirectServer,
    /// The direct server's own CPU cgroup (dropped after the server).
    group: Option<CpuGroup>,
}

/// A CPU cgroup of one process, removed when dropped (after the process).
///
/// The sandbox puts each function process in cgroups of its own, and on two
/// busy cores that alone changes how the scheduler shares them (a Node hello
/// function served 1.6× the requests through the operator when moved into a
/// CPU cgroup by hand, docs/performance.md). Under strict isolation the
/// direct baseline gets a CPU cgroup of its own too (no quota), so that (a)
/// and (b) are scheduled alike and the ratio measures the proxy.
struct CpuGroup(PathBuf);

impl CpuGroup {
    /// Moves `pid` into a new CPU cgroup (cgroup v1's `cpu` hierarchy, or
    /// the cgroup2 root when it offers `cpu`); `None` when none is writable.
    fn own(pid: u32) -> Option<CpuGroup> {
        let v2 = Path::new("/sys/fs/cgroup");
        let root = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("tasks").exists())
            .or_else(|| {
                std::fs::read_to_string(v2.join("cgroup.subtree_control"))
                    .ok()
                    .filter(|c| c.split_whitespace().any(|x| x == "cpu"))
                    .map(|_| v2.to_path_buf())
            })?;
        let dir = root.join(format!("sless-bench-direct-{pid}"));
        std::fs::create_dir_all(&dir).ok()?;
        let group = CpuGroup(dir);
        std::fs::write(group.0.join("cgroup.procs"), pid.to_string()).ok()?;
        Some(group)
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // Empty once its process is gone (the server is killed first).
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Writes the hello code of `language`, starts it by hand and deploys it as
/// `name` (Ready and answering once).
fn prepare(
    client: &Client,
    workspace: &Path,
    work: &Path,
    language: &'static str,
    own_group: bool,
) -> Result<Subject> {
    let code = work.join(format!("code/invoke-{language}"));
    let (runtime, entry) = match language {
        "python" => {
            fixtures::python_hello(&code, "invoke")?;
            ("python3.11", "main.handler")
        }
        _ => {
            fixtures::node_hello(&code)?;
            ("nodejs20", "index.handler")
        }
    };
    let direct = coldstart::spawn_direct(workspace, language, &code)?;
    let group = if own_group {
        let g = CpuGroup::own(direct.pid());
        if g.is_none() {
            println!(
                "  (no CPU cgroup for the direct {language} server: scheduled in the root group)"
            );
        }
        g
    } else {
        None
    };
    let name = format!("{language}-hello");
    coldstart::through_operator(client, &name, runtime, entry, &code)?;
    Ok(Subject {
        language,
        name,
        direct,
        group,
    })
}

/// Runs the section on an operator of its own (data under `out`).
pub fn run(
    report: &mut Report,
    operator_bin: &Path,
    workspace: &Path,
    out: &Path,
    l: Load,
) -> Result<()> {
    wrk::ensure_installed()?;
    let (isolation, extra) = super::operator::default_isolation();
    let strict = isolation == "strict";
    println!("section 1 on an operator with isolation {isolation} (the default as root)");
    let op = Operator::start_with(operator_bin, &out.join("operator-data-invoke"), extra)?;
    let client = op.client("bench-invoke")?;
    let work = out.join("wrk");
    let ticks_per_second = stats::ticks_per_second();
    std::fs::create_dir_all(&work).map_err(super::error::io("create", &work))?;
    let (plain, authed) = wrk::post_scripts(&work, BODY, &client.auth)?;
    let mut raw = serde_json::Map::new();
    raw.insert("isolation".into(), isolation.into());
    for language in ["python", "node"] {
        let f = prepare(&client, workspace, out, language, strict)?;
        raw.insert(
            format!("{language}_direct_own_cpu_cgroup"),
            f.group.is_some().into(),
        );
        let (function_pid, _) = client.process(&f.name)?;
        let proxied = Watched {
            operator: op.pid(),
            function: function_pid,
            ticks_per_second,
        };
        let by_hand = Watched {
            function: f.direct.pid(),
            ..proxied
        };
        let port = f.direct.port;
        let direct_url = format!("http://127.0.0.1:{port}/");
        let invoke_url = format!("http://{}{}", client.addr, client.invoke_path(&f.name));
        let lang = f.language;
        let am = load(
            report,
            &format!("{lang} (a) direct"),
            &direct_url,
            &plain,
            l,
            by_hand,
        )?;
        let bm = load(
            report,
            &format!("{lang} (b) invoke endpoint"),
            &invoke_url,
            &authed,
            l,
            proxied,
        )?;
        report_cpu(report, lang, "(b) invoke endpoint", &bm, &am);
        let (a, b) = (&am.wrk, &bm.wrk);
        report.ratio(
            SECTION,
            &format!("{lang}: throughput (b) invoke endpoint / (a) direct"),
            b.rps,
            a.rps,
            "req/s",
            &format!("throughput ratio; 1 = no proxy cost (isolation {isolation})"),
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
            serde_json::to_value(&am).unwrap_or_default(),
        );
        raw.insert(
            format!("{lang}_b_invoke"),
            serde_json::to_value(&bm).unwrap_or_default(),
        );
        let trigger = format!("{}-http", f.name);
        match client.create_http_trigger(&trigger, &f.name) {
            Ok(path) => {
                wait_public(&client.addr, &path)?;
                let url = format!("http://{}{}", client.addr, path);
                let what = format!("{lang} (c) http trigger");
                let cm = load(report, &what, &url, &plain, l, proxied)?;
                report_cpu(report, lang, "(c) http trigger", &cm, &am);
                let c = &cm.wrk;
                report.ratio(
                    SECTION,
                    &format!("{lang}: throughput (c) http trigger / (a) direct"),
                    c.rps,
                    a.rps,
                    "req/s",
                    &format!("throughput ratio; 1 = no proxy cost (isolation {isolation})"),
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
                    serde_json::to_value(&cm).unwrap_or_default(),
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
