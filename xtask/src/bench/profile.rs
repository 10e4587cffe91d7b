//! Section 7: the operator's CPU per proxied request, as instructions counted
//! by callgrind (repeatable on a noisy machine, unlike time). The release
//! operator runs under `valgrind --tool=callgrind` (`--isolation none`, as
//! section 1); after a warm-up, the counters are zeroed, wrk sends keep-alive
//! requests through (b) the authenticated invoke endpoint and (c) an http
//! trigger URL, the counters are dumped, and the operator's instructions are
//! divided by the requests wrk saw answered, beside the same count for
//! `GET /healthz` (the operator's floor as an HTTP server). The top functions of each dump
//! are written next to it (`callgrind_annotate`) for docs/performance.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::error::{BenchError, Result, io};
use super::fixtures;
use super::invoke::wait_public;
use super::operator::Operator;
use super::report::Report;
use super::wrk::{self, Load};

const SECTION: &str = "7 proxy instructions";
const BODY: &str = "{\"name\":\"bench\"}";

/// Fails with an installation hint unless valgrind is on PATH.
fn ensure_valgrind() -> Result<()> {
    for tool in ["valgrind", "callgrind_control", "callgrind_annotate"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Err(BenchError::MissingTool {
                tool: "valgrind",
                hint: "install the Debian package: `apt-get install -y valgrind`".to_owned(),
            });
        }
    }
    Ok(())
}

fn callgrind_control(args: &[&str], pid: u32) -> Result<()> {
    let out = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .output()
        .map_err(|source| crate::Error::Spawn {
            program: "callgrind_control".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(BenchError::RunFailed(format!(
            "callgrind_control {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// The dump files in `dir`, oldest first.
fn dumps(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("callgrind.out"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// The `totals:` (or `summary:`) instruction count of a callgrind dump.
pub fn total_instructions(dump: &str) -> Option<u64> {
    dump.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Zeroes the counters, runs wrk on `url`, dumps; returns (instructions,
/// requests answered, the dump's path).
fn measure(pid: u32, dir: &Path, url: &str, script: &Path, l: Load) -> Result<(u64, u64, PathBuf)> {
    let before = dumps(dir).len();
    callgrind_control(&["--zero"], pid)?;
    let r = wrk::run(url, script, l)?;
    if let Some(f) = r.failure() {
        return Err(BenchError::RunFailed(format!("wrk {url}: {f}")));
    }
    callgrind_control(&["--dump"], pid)?;
    let mut files = dumps(dir);
    if files.len() <= before {
        // The dump is written asynchronously; give it a moment.
        std::thread::sleep(Duration::from_secs(2));
        files = dumps(dir);
    }
    let dump = files
        .last()
        .cloned()
        .ok_or_else(|| BenchError::RunFailed("callgrind wrote no dump".into()))?;
    let text = std::fs::read_to_string(&dump).map_err(io("read", &dump))?;
    let ir = total_instructions(&text).ok_or_else(|| BenchError::Parse {
        tool: "callgrind",
        reason: format!("no totals line in {}", dump.display()),
    })?;
    Ok((ir, r.requests, dump))
}

/// `<dump>.top.txt`.
fn top_path(dump: &Path) -> PathBuf {
    let mut name = dump.as_os_str().to_owned();
    name.push(".top.txt");
    PathBuf::from(name)
}

/// Writes the top functions of `dump` (inclusive) to `<dump>.top.txt`.
fn annotate(dump: &Path) {
    let out = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=99"])
        .arg(dump)
        .output();
    if let Ok(out) = out {
        let path = top_path(dump);
        let text: String = String::from_utf8_lossy(&out.stdout)
            .lines()
            .take(80)
            .collect::<Vec<_>>()
            .join("\n");
        let _ = std::fs::write(path, text);
    }
}

/// Runs the section.
pub fn run(report: &mut Report, operator_bin: &Path, work: &Path, quick: bool) -> Result<()> {
    ensure_valgrind()?;
    let dir = work.join("callgrind");
    fixtures::fresh_dir(&dir)?;
    let out_file = dir.join("callgrind.out");
    let wrapper = vec![
        "valgrind".to_string(),
        "--tool=callgrind".to_string(),
        format!("--callgrind-out-file={}", out_file.display()),
    ];
    println!("  starting the operator under callgrind");
    let op = Operator::start_wrapped(
        &wrapper,
        operator_bin,
        &work.join("callgrind-data"),
        &["--isolation", "none"],
    )?;
    let client = op.client("bench-callgrind")?;
    let code = work.join("code/callgrind-py");
    fixtures::python_hello(&code, "callgrind")?;
    let (zip, hash) = fixtures::package(&code)?;
    client.create_function_with(
        "prof",
        "python3.11",
        "main.handler",
        serde_json::json!({"min_instances": 1}),
    )?;
    client.upload_code("prof", &zip, &hash)?;
    client.wait_ready("prof", Duration::from_secs(300))?;
    let trigger = client.create_http_trigger("prof-t", "prof")?;
    wait_public(&client.addr, &trigger)?;

    let (plain, authed) = wrk::post_scripts(&dir, BODY, &client.auth)?;
    let invoke_url = format!("http://{}{}", client.addr, client.invoke_path("prof"));
    let trigger_url = format!("http://{}{trigger}", client.addr);
    let warm = Load {
        threads: 1,
        connections: 8,
        duration_secs: 2,
    };
    let load = Load {
        duration_secs: if quick { 3 } else { 8 },
        ..warm
    };
    let pid = op.pid();
    let _ = wrk::run(&invoke_url, &authed, warm)?;
    let _ = wrk::run(&trigger_url, &plain, warm)?;
    let mut raw = serde_json::Map::new();
    // The baseline: the same operator answering its cheapest request (accept,
    // parse, route, a fixed answer), so the ratio is what proxying costs on
    // top of being an HTTP server at all.
    let get = dir.join("get.lua");
    wrk::write_script(&get, "wrk.method = \"GET\"\n")?;
    let healthz_url = format!("http://{}/healthz", client.addr);
    let _ = wrk::run(&healthz_url, &get, warm)?;
    println!("  callgrind: wrk GET /healthz (baseline)");
    let (base_ir, base_requests, base_dump) = measure(pid, &dir, &healthz_url, &get, load)?;
    annotate(&base_dump);
    let floor = base_ir as f64 / base_requests.max(1) as f64;
    raw.insert(
        "GET /healthz".to_string(),
        serde_json::json!({"instructions": base_ir, "requests": base_requests, "per_request": floor}),
    );
    for (what, url, script) in [
        ("(b) invoke endpoint", &invoke_url, &authed),
        ("(c) http trigger", &trigger_url, &plain),
    ] {
        println!("  callgrind: wrk {what}");
        let (ir, requests, dump) = measure(pid, &dir, url, script, load)?;
        annotate(&dump);
        let per = ir as f64 / requests.max(1) as f64;
        report.ratio(
            SECTION,
            &format!(
                "python {what}: operator instructions per request (callgrind) vs GET /healthz"
            ),
            per,
            floor,
            "instr",
            &format!(
                "{requests} keep-alive requests on 8 connections under valgrind \
                 ({base_requests} for /healthz); top functions in {}",
                top_path(&dump).display()
            ),
        );
        raw.insert(
            what.to_string(),
            serde_json::json!({"instructions": ir, "requests": requests, "per_request": per}),
        );
    }
    report.raw("proxy_instructions", raw);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::total_instructions;

    #[test]
    fn totals_come_from_the_last_totals_or_summary_line() {
        assert_eq!(
            total_instructions("events: Ir\nfn=a\n1 5\ntotals: 12345\n"),
            Some(12345)
        );
        assert_eq!(total_instructions("summary: 77\n"), Some(77));
        assert_eq!(total_instructions("events: Ir\n"), None);
    }
}
