//! Load and soak (issue 15): wrk saturates the real operator's authenticated
//! invoke endpoint across 20 Ready Python functions (real processes, strict
//! isolation when run as root). After a warm-up, a soak of
//! `SLESS_SOAK_SECONDS` (default 10; issue 15 asks for 60) must see 0 non-2xx
//! answers and 0 socket errors, and the operator's RSS at the end must be
//! within +10% of its RSS after the warm-up. Needs `wrk` on PATH
//! (`scripts/lib/tools.sh` installs it).

mod support;

use serde_json::json;
use sless_wire::Phase;
use std::process::Command;
use std::time::Duration;
use support::Operator;

const FUNCTIONS: usize = 20;
/// Load before the RSS baseline: the pools and allocator arenas fill for tens of seconds.
const WARMUP_SECONDS: u64 = 15;

/// What one wrk run reported.
#[derive(Debug, Default)]
struct WrkRun {
    requests: u64,
    non_2xx: u64,
    socket_errors: u64,
    seconds: f64,
    output: String,
}

/// Runs wrk for `seconds` with `script` against `url`.
fn wrk(url: &str, script: &std::path::Path, seconds: u64) -> WrkRun {
    let out = Command::new("wrk")
        .args(["-t2", "-c32", "--timeout", "10s"])
        .arg(format!("-d{seconds}s"))
        .arg("-s")
        .arg(script)
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run wrk ({e}); install it: apt-get install -y wrk"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "wrk failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut run = WrkRun {
        output: text.clone(),
        ..Default::default()
    };
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_suffix(" read")
            && let Some((n, after)) = rest.split_once(" requests in ")
        {
            run.requests = n.trim().parse().unwrap_or(0);
            run.seconds = after.split(',').next().map(wrk_seconds).unwrap_or(0.0);
        } else if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
            run.non_2xx = n.trim().parse().unwrap_or(u64::MAX);
        } else if let Some(errs) = line.strip_prefix("Socket errors:") {
            run.socket_errors = errs
                .split(',')
                .filter_map(|e| e.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
        }
    }
    assert!(run.requests > 0, "no requests counted by wrk:\n{text}");
    run
}

/// A wrk duration (`10.00s`, `1.00m`, `950.00ms`) in seconds.
fn wrk_seconds(d: &str) -> f64 {
    let d = d.trim();
    let (num, scale) = if let Some(n) = d.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = d.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = d.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (d.strip_suffix('s').unwrap_or(d), 1.0)
    };
    num.parse::<f64>().map(|n| n * scale).unwrap_or(0.0)
}

/// Open file descriptors of `pid` (client and upstream sockets included).
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Resident set size of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS of the operator")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturation_against_twenty_functions_without_errors_or_growth() {
    let soak_seconds: u64 = std::env::var("SLESS_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let op = Operator::start();
    let c = op.client("soak");
    c.ensure().await;
    let names: Vec<String> = (0..FUNCTIONS).map(|i| format!("soak-{i:02}")).collect();
    for n in &names {
        let (code, body) = c
            .create(json!({"name": n, "runtime": "python3.11", "entrypoint": "main.handler", "min_instances": 1}))
            .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = c.upload(n, support::python_hello_zip()).await;
        assert!(code == 202 || code == 200, "upload {n}: {code} {body}");
    }
    for n in &names {
        c.wait_phase(n, Phase::Ready, Duration::from_secs(120))
            .await;
    }

    // One wrk script: POSTs rotating over the 20 invoke paths.
    let paths: Vec<String> = names
        .iter()
        .map(|n| format!("{:?}", sless_wire::paths::function_invoke(&c.namespace, n)))
        .collect();
    let script = op.data_dir.join("soak.lua");
    std::fs::write(
        &script,
        format!(
            "local paths = {{{}}}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n  \
             return wrk.format(\"POST\", paths[i], {{[\"Authorization\"] = \"Bearer {}\", \
             [\"Content-Type\"] = \"application/json\"}}, '{{\"name\": \"soak\"}}')\nend\n",
            paths.join(", "),
            c.token
        ),
    )
    .expect("wrk script");
    let pid = op.child.as_ref().expect("operator").id();
    let rss_start = rss_kib(pid);
    let url = op.base_url.clone();

    // The soak in segments of at most 10 s, back to back, with the RSS after each.
    let (warm, rss_warm, fds_warm, segments) = tokio::task::spawn_blocking(move || {
        let warm = wrk(&url, &script, WARMUP_SECONDS);
        let rss_warm = rss_kib(pid);
        let fds_warm = fd_count(pid);
        let mut segments = Vec::new();
        let mut left = soak_seconds;
        while left > 0 {
            let d = left.min(10);
            segments.push((wrk(&url, &script, d), rss_kib(pid), fd_count(pid)));
            left -= d;
        }
        (warm, rss_warm, fds_warm, segments)
    })
    .await
    .expect("wrk runs");
    let rss_end = segments.last().map(|s| s.1).unwrap_or(rss_warm);
    let series: Vec<u64> = segments.iter().map(|s| s.1).collect();
    let fds: Vec<usize> = segments.iter().map(|s| s.2).collect();
    let soak = WrkRun {
        requests: segments.iter().map(|s| s.0.requests).sum(),
        non_2xx: segments.iter().map(|s| s.0.non_2xx).sum(),
        socket_errors: segments.iter().map(|s| s.0.socket_errors).sum(),
        seconds: segments.iter().map(|s| s.0.seconds).sum(),
        output: segments
            .iter()
            .map(|s| s.0.output.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    };

    println!(
        "soak: {FUNCTIONS} functions; warm-up {} requests in {:.1} s; soak {} requests in {:.1} s \
         ({:.0} req/s), non-2xx {}, socket errors {}; operator RSS {} KiB at start, {} KiB after \
         warm-up, {} KiB at the end ({:+.1}%); RSS after each 10 s: {series:?}; open fds after warm-up {fds_warm}, after each 10 s: {fds:?}",
        warm.requests,
        warm.seconds,
        soak.requests,
        soak.seconds,
        soak.requests as f64 / soak.seconds.max(0.001),
        soak.non_2xx,
        soak.socket_errors,
        rss_start,
        rss_warm,
        rss_end,
        (rss_end as f64 / rss_warm as f64 - 1.0) * 100.0
    );
    for (what, run) in [("warm-up", &warm), ("soak", &soak)] {
        assert_eq!(run.non_2xx, 0, "{what}: non-2xx answers:\n{}", run.output);
        assert_eq!(
            run.socket_errors, 0,
            "{what}: socket errors:\n{}",
            run.output
        );
    }
    assert!(
        rss_end * 10 <= rss_warm * 11,
        "operator RSS grew from {rss_warm} KiB after the warm-up to {rss_end} KiB (> +10%)"
    );
    // Every function still answers.
    for n in &names {
        let (code, text) = c.invoke(n, &json!({"name": "end"})).await;
        assert_eq!(code, 200, "{n}: {text}");
    }
}
