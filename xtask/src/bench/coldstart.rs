//! Section 4: upload → Ready and first-invoke latency through the operator, against
//! starting the runtime server directly with the same code (time to its READY line
//! and first answer). Also measures the idle RSS of each runtime process (section 5).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::error::{BenchError, Result, io};
use super::fixtures;
use super::http;
use super::operator::Client;
use super::report::Report;
use super::stats;

const SECTION: &str = "4 cold start";
const BODY: &str = "{\"name\":\"bench\"}";

/// What starting the runtime server by hand took.
pub(crate) struct Direct {
    /// Spawn → READY line.
    pub ready_ms: f64,
    /// First request → answer.
    pub first_ms: f64,
    /// RSS after the first answer.
    pub rss_mib: f64,
}

/// A runtime server started by hand (no operator, no sandbox), listening on
/// `127.0.0.1:port`; killed when dropped.
pub(crate) struct DirectServer {
    child: Child,
    /// Its loopback port.
    pub port: u16,
    /// Spawn → READY line.
    pub ready_ms: f64,
}

impl DirectServer {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for DirectServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The interpreter `program` resolves to (`sys.executable` / `process.execPath`).
fn real_program(program: &str) -> String {
    let probe = match program {
        "python3" => "import sys; print(sys.executable)",
        _ => "console.log(process.execPath)",
    };
    let flag = if program == "python3" { "-c" } else { "-e" };
    Command::new(program)
        .args([flag, probe])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| program.to_owned())
}

/// Starts the runtime server of `language` by hand on `code` with the same
/// `SLESS_*` environment the operator gives it, and waits for its READY line.
pub(crate) fn spawn_direct(workspace: &Path, language: &str, code: &Path) -> Result<DirectServer> {
    let code = code.canonicalize().map_err(io("resolve", code))?;
    let (program, server, entry) = match language {
        "python" => ("python3", "server.py", "main.handler"),
        _ => ("node", "server.js", "index.handler"),
    };
    let server = workspace.join("operator/runtimes").join(server);
    // The interpreter itself, not a version manager's shim in front of it
    // (pyenv's costs ~100 ms per start): the operator resolves it the same way.
    let program = real_program(program);
    let mut cmd = Command::new(&program);
    if language == "python" {
        cmd.arg("-u");
    }
    let t = Instant::now();
    let mut child = cmd
        .arg(&server)
        .current_dir(&code)
        .env_clear()
        .envs(
            ["PATH", "HOME", "LANG"]
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (*k, v))),
        )
        .env("SLESS_ENTRYPOINT", entry)
        .env("SLESS_FUNCTION", "direct")
        .env("SLESS_NAMESPACE", "direct")
        .env("SLESS_CODE_DIR", &code)
        .env("SLESS_HOST", "127.0.0.1")
        .env("SLESS_PORT", "0")
        .env("SLESS_TIMEOUT_SEC", "30")
        .env("SLESS_MEMORY_MB", "256")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| crate::Error::Spawn {
            program: program.clone(),
            source,
        })?;
    let stdout = child.stdout.take();
    let mut guard = DirectServer {
        child,
        port: 0,
        ready_ms: 0.0,
    };
    let stdout = stdout.ok_or_else(|| BenchError::RunFailed("no stdout".into()))?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(io("read the READY line of", &server))?;
    guard.ready_ms = t.elapsed().as_secs_f64() * 1000.0;
    guard.port = line
        .trim()
        .strip_prefix("SLESS_READY port=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| BenchError::Parse {
            tool: "runtime server",
            reason: format!("expected `SLESS_READY port=N`, got `{}`", line.trim()),
        })?;
    Ok(guard)
}

/// Starts the runtime server of `language` by hand on `code` (no operator,
/// no sandbox) and times it.
pub(crate) fn direct_start(workspace: &Path, language: &str, code: &Path) -> Result<Direct> {
    let server = spawn_direct(workspace, language, code)?;
    let t = Instant::now();
    let r = http::request(
        &format!("127.0.0.1:{}", server.port),
        "POST",
        "/",
        &[("Content-Type", "application/json")],
        BODY.as_bytes(),
    )?;
    let first_ms = t.elapsed().as_secs_f64() * 1000.0;
    if !r.is_success() {
        return Err(BenchError::RunFailed(format!(
            "direct {language} server answered {}: {}",
            r.status,
            r.text()
        )));
    }
    std::thread::sleep(Duration::from_millis(300));
    let rss_mib = stats::rss_mib(server.pid()).unwrap_or(f64::NAN);
    Ok(Direct {
        ready_ms: server.ready_ms,
        first_ms,
        rss_mib,
    })
}

/// Upload → Ready and first invoke through the operator: (ready ms, first ms).
pub(crate) fn through_operator(
    client: &Client,
    name: &str,
    runtime: &str,
    entry: &str,
    code: &Path,
) -> Result<(f64, f64)> {
    client.create_function(name, runtime, entry)?;
    let (zip, hash) = fixtures::package(code)?;
    let t = Instant::now();
    client.upload_code(name, &zip, &hash)?;
    client.wait_ready(name, Duration::from_secs(300))?;
    let ready_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let r = client.invoke(name, BODY)?;
    let first_ms = t.elapsed().as_secs_f64() * 1000.0;
    if !r.is_success() {
        return Err(BenchError::RunFailed(format!(
            "first invoke of {name}: {}",
            r.status
        )));
    }
    Ok((ready_ms, first_ms))
}

/// Runs the section (and section 5's idle runtime RSS, on the same functions).
pub fn run(report: &mut Report, client: &Client, workspace: &Path, work: &Path) -> Result<()> {
    let py: PathBuf = work.join("code/py");
    let py_deps = work.join("code/py-deps");
    let node = work.join("code/node");
    fixtures::python_hello(&py, "cold")?;
    fixtures::python_with_wheel(&py_deps)?;
    fixtures::node_hello(&node)?;

    let d_py = direct_start(workspace, "python", &py)?;
    let d_node = direct_start(workspace, "node", &node)?;

    let (py_ready, py_first) =
        through_operator(client, "py-hello", "python3.11", "main.handler", &py)?;
    let (cold_ready, cold_first) = through_operator(
        client,
        "py-deps-cold",
        "python3.11",
        "main.handler",
        &py_deps,
    )?;
    let (warm_ready, warm_first) = through_operator(
        client,
        "py-deps-warm",
        "python3.11",
        "main.handler",
        &py_deps,
    )?;
    let (node_ready, node_first) =
        through_operator(client, "node-hello", "nodejs20", "index.handler", &node)?;

    let note_ready =
        "upload→Ready via the operator vs spawn→READY line of the runtime server started directly";
    let note_first =
        "first invoke through the operator vs first request to the directly started server";
    report.delta(
        SECTION,
        "python: upload→Ready vs direct start",
        py_ready,
        d_py.ready_ms,
        "ms",
        note_ready,
    );
    report.delta(
        SECTION,
        "python: first invoke vs direct first request",
        py_first,
        d_py.first_ms,
        "ms",
        note_first,
    );
    report.delta(
        SECTION,
        "python+wheel, cold dep cache: upload→Ready vs direct start",
        cold_ready,
        d_py.ready_ms,
        "ms",
        "includes pip install of a local wheel",
    );
    report.delta(
        SECTION,
        "python+wheel, cold cache: first invoke vs direct",
        cold_first,
        d_py.first_ms,
        "ms",
        note_first,
    );
    report.delta(
        SECTION,
        "python+wheel, warm dep cache: upload→Ready vs direct start",
        warm_ready,
        d_py.ready_ms,
        "ms",
        "same requirements: the dependency cache is reused",
    );
    report.ratio(
        SECTION,
        "python+wheel: warm vs cold cache upload→Ready",
        warm_ready,
        cold_ready,
        "ms",
        "time ratio; <1 = the cache helps",
    );
    report.delta(
        SECTION,
        "python+wheel, warm cache: first invoke vs direct",
        warm_first,
        d_py.first_ms,
        "ms",
        note_first,
    );
    report.delta(
        SECTION,
        "node: upload→Ready vs direct start",
        node_ready,
        d_node.ready_ms,
        "ms",
        note_ready,
    );
    report.delta(
        SECTION,
        "node: first invoke vs direct first request",
        node_first,
        d_node.first_ms,
        "ms",
        note_first,
    );

    // Section 5: idle runtime processes (invoked once, then left alone).
    std::thread::sleep(Duration::from_millis(500));
    for (name, direct, label) in [
        ("py-hello", &d_py, "python"),
        ("node-hello", &d_node, "node"),
    ] {
        let (pid, _) = client.process(name)?;
        let rss = stats::rss_mib(pid)
            .ok_or_else(|| BenchError::RunFailed(format!("no /proc/{pid}/status for {name}")))?;
        report.ratio(
            "5 memory",
            &format!("idle {label} runtime process RSS vs same server started directly"),
            rss,
            direct.rss_mib,
            "MiB",
            "ratio ~1: the operator adds nothing to the process",
        );
    }
    Ok(())
}
