//! Running `wrk` (the Debian package) and reading its report.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::{BenchError, Result, io};

/// What one `wrk --latency` run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WrkResult {
    /// Completed requests.
    pub requests: u64,
    /// Requests per second over the run.
    pub rps: f64,
    /// Median latency in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency in milliseconds.
    pub p99_ms: f64,
    /// Answers with a status of 400 or more (wrk's "Non-2xx or 3xx responses").
    pub non_2xx: u64,
    /// Socket errors: connect, read, write, timeout.
    pub socket_errors: [u64; 4],
}

impl WrkResult {
    /// Why this run cannot count, if it cannot: error answers, timeouts or nothing done.
    pub fn failure(&self) -> Option<String> {
        if self.non_2xx > 0 {
            return Some(format!(
                "{} of {} answers were not 2xx/3xx",
                self.non_2xx, self.requests
            ));
        }
        if self.socket_errors[0] > 0 || self.socket_errors[3] > 0 {
            return Some(format!(
                "{} connect errors and {} timeouts",
                self.socket_errors[0], self.socket_errors[3]
            ));
        }
        if self.requests == 0 {
            return Some("no request completed".to_owned());
        }
        None
    }
}

/// Converts a wrk duration such as `812.00us`, `1.23ms` or `2.01s` to milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(v * factor)
}

/// Parses the text `wrk --latency` prints.
pub fn parse(text: &str) -> Result<WrkResult> {
    let err = |reason: &str| BenchError::Parse {
        tool: "wrk",
        reason: format!("{reason} in:\n{text}"),
    };
    let mut requests = None;
    let mut rps = None;
    let mut p50 = None;
    let mut p99 = None;
    let mut non_2xx = 0;
    let mut socket_errors = [0u64; 4];
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            rps = rest.trim().parse::<f64>().ok();
        } else if let Some(rest) = line.strip_prefix("50%") {
            p50 = parse_duration_ms(rest);
        } else if let Some(rest) = line.strip_prefix("99%") {
            p99 = parse_duration_ms(rest);
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            non_2xx = rest.trim().parse().map_err(|_| err("bad non-2xx count"))?;
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            for (i, part) in rest.split(',').enumerate().take(4) {
                let n = part.split_whitespace().nth(1).and_then(|n| n.parse().ok());
                socket_errors[i] = n.ok_or_else(|| err("bad socket error line"))?;
            }
        } else if line.contains(" requests in ") {
            requests = line.split_whitespace().next().and_then(|n| n.parse().ok());
        }
    }
    Ok(WrkResult {
        requests: requests.ok_or_else(|| err("no `N requests in` line"))?,
        rps: rps.ok_or_else(|| err("no `Requests/sec:` line"))?,
        p50_ms: p50.ok_or_else(|| err("no 50% latency (was --latency given?)"))?,
        p99_ms: p99.ok_or_else(|| err("no 99% latency (was --latency given?)"))?,
        non_2xx,
        socket_errors,
    })
}

/// Writes `post.lua` (POST `body`) and `post-auth.lua` (the same with
/// `Authorization: auth`) into `dir`; returns their paths in that order.
pub fn post_scripts(dir: &Path, body: &str, auth: &str) -> Result<(PathBuf, PathBuf)> {
    let plain = dir.join("post.lua");
    let authed = dir.join("post-auth.lua");
    write_script(&plain, &post_script(body, &[]))?;
    write_script(&authed, &post_script(body, &[("Authorization", auth)]))?;
    Ok((plain, authed))
}

/// A wrk Lua script that sends `POST` with a JSON body and the given headers.
pub fn post_script(body: &str, headers: &[(&str, &str)]) -> String {
    let mut s = String::from("wrk.method = \"POST\"\n");
    s.push_str(&format!("wrk.body = {}\n", lua_string(body)));
    s.push_str("wrk.headers[\"Content-Type\"] = \"application/json\"\n");
    for (k, v) in headers {
        s.push_str(&format!(
            "wrk.headers[{}] = {}\n",
            lua_string(k),
            lua_string(v)
        ));
    }
    s
}

fn lua_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Fails with an installation hint unless `wrk` is on PATH.
pub fn ensure_installed() -> Result<()> {
    match Command::new("wrk").arg("--version").output() {
        Ok(_) => Ok(()),
        Err(_) => Err(BenchError::MissingTool {
            tool: "wrk",
            hint: "install the Debian package: `apt-get install -y wrk`".to_owned(),
        }),
    }
}

/// Load parameters, fixed for a whole run.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Load {
    /// wrk threads.
    pub threads: u32,
    /// Open connections.
    pub connections: u32,
    /// Seconds per measurement.
    pub duration_secs: u32,
}

/// Runs wrk against `url` with the Lua script at `script`.
pub fn run(url: &str, script: &Path, load: Load) -> Result<WrkResult> {
    let mut cmd = Command::new("wrk");
    cmd.arg(format!("-t{}", load.threads))
        .arg(format!("-c{}", load.connections))
        .arg(format!("-d{}s", load.duration_secs))
        .arg("--timeout")
        .arg("10s")
        .arg("--latency")
        .arg("-s")
        .arg(script)
        .arg(url);
    let text = crate::cmd::stdout_text(&mut cmd)?;
    parse(&text)
}

/// Writes a Lua script file.
pub fn write_script(path: &Path, script: &str) -> Result<()> {
    std::fs::write(path, script).map_err(io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Running 3s test @ http://127.0.0.1:4000/\n  1 threads and 8 connections\n  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency     1.03ms  301.28us   8.22ms   87.02%\n    Req/Sec     7.82k   483.35     8.52k    73.00%\n  Latency Distribution\n     50%  812.00us\n     75%    1.12ms\n     90%    1.32ms\n     99%    2.10s\n  77845 requests in 10.00s, 10.25MB read\n  Socket errors: connect 0, read 12, write 0, timeout 3\n  Non-2xx or 3xx responses: 5\nRequests/sec:   7783.99\nTransfer/sec:      1.02MB\n";

    #[test]
    fn parses_a_full_report_with_errors() {
        let r = parse(SAMPLE).unwrap();
        assert_eq!(r.requests, 77845);
        assert!((r.rps - 7783.99).abs() < 1e-9);
        assert!((r.p50_ms - 0.812).abs() < 1e-9);
        assert!((r.p99_ms - 2100.0).abs() < 1e-9);
        assert_eq!(r.non_2xx, 5);
        assert_eq!(r.socket_errors, [0, 12, 0, 3]);
        assert!(r.failure().unwrap().contains("5 of 77845"));
    }

    #[test]
    fn a_clean_report_is_not_a_failure_and_non_2xx_defaults_to_zero() {
        let clean = SAMPLE
            .replace("  Non-2xx or 3xx responses: 5\n", "")
            .replace(
                "  Socket errors: connect 0, read 12, write 0, timeout 3\n",
                "",
            );
        let r = parse(&clean).unwrap();
        assert_eq!(r.non_2xx, 0);
        assert_eq!(r.failure(), None);
    }

    #[test]
    fn a_report_without_latency_distribution_is_refused() {
        let e = parse("  10 requests in 1.00s, 1KB read\nRequests/sec: 10.0\n").unwrap_err();
        assert!(e.to_string().contains("--latency"), "{e}");
    }

    #[test]
    fn script_escapes_quotes() {
        let s = post_script("{\"a\":1}", &[("Authorization", "Bearer x\"y")]);
        assert!(s.contains("wrk.body = \"{\\\"a\\\":1}\""), "{s}");
        assert!(
            s.contains("wrk.headers[\"Authorization\"] = \"Bearer x\\\"y\""),
            "{s}"
        );
    }
}
