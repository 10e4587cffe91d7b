//! The acceptance-test harness shared by the test files: the real operator
//! on a loopback port, a Terraform working directory wired to the built
//! provider through `dev_overrides`, and small helpers.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SOURCE: &str = "sless.example/sless/sless";

/// A service's `app.py`: answers every GET with `svc` on `$PORT`.
pub const SERVICE_APP_PY: &str = r#"import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'svc'
        self.send_response(200)
        self.send_header('content-length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(('127.0.0.1', int(os.environ['PORT'])), Handler).serve_forever()
"#;

pub fn skip() -> bool {
    if std::env::var("TF_ACC").as_deref() != Ok("1") {
        println!("skipped: set TF_ACC=1 to run the Terraform acceptance tests");
        return true;
    }
    false
}

/// `target/debug/sless-operator`, next to this test's `deps/` folder.
pub fn operator_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    let bin = dir.join("sless-operator");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p sless-operator` first (scripts/test.sh builds every binary)",
        bin.display()
    );
    bin
}

pub fn terraform_bin() -> String {
    std::env::var("TERRAFORM").unwrap_or_else(|_| "terraform".to_string())
}

/// The `(major, minor)` of the Terraform the tests run, from the first line of
/// `terraform version` (`Terraform v1.11.4`).
pub fn terraform_version() -> (u32, u32) {
    let out = Command::new(terraform_bin())
        .arg("version")
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("run terraform version (set TERRAFORM or put it on PATH)");
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let v = first.trim_start_matches("Terraform v");
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor)
}

/// Whether the Terraform under test is at least `major.minor`; prints why a
/// step is skipped when it is not.
pub fn terraform_at_least(major: u32, minor: u32, feature: &str) -> bool {
    let have = terraform_version();
    if have < (major, minor) {
        println!(
            "skipped: {feature} needs Terraform >= {major}.{minor}, this is {}.{}",
            have.0, have.1
        );
        return false;
    }
    true
}

/// The real operator on a loopback port with a temporary data dir.
pub struct Operator {
    child: Child,
    /// The operator's data dir.
    pub data_dir: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
}

impl Operator {
    pub fn start(data_dir: &Path) -> Operator {
        Operator::start_with_env(data_dir, &[])
    }

    /// [`Operator::start`] with extra environment variables for the operator
    /// (and so for the pip and npm of its builds).
    pub fn start_with_env(data_dir: &Path, env: &[(&str, String)]) -> Operator {
        Operator::start_listening(data_dir, "127.0.0.1:0", env)
    }

    /// The operator listening on `listen` (`127.0.0.1:0` for any free port);
    /// a restart on the same data dir and port looks to Terraform like the
    /// same operator. The log is appended to, so it spans restarts.
    pub fn start_listening(data_dir: &Path, listen: &str, env: &[(&str, String)]) -> Operator {
        std::fs::create_dir_all(data_dir).unwrap();
        // A stale address from a killed run must not pass for this one's.
        let _ = std::fs::remove_file(data_dir.join("operator.addr"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("operator-test.log"))
            .unwrap();
        let child = Command::new(operator_bin())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            // The acceptance tests' functions and jobs write side-effect
            // files for the tests to read, which the strict sandbox (rightly)
            // forbids; the sandbox itself is proven in operator/tests/sandbox.rs.
            .args([
                "serve",
                "--isolation",
                "none",
                "--listen",
                listen,
                "--data-dir",
            ])
            .arg(data_dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn sless-operator");
        let mut op = Operator {
            child,
            data_dir: data_dir.to_path_buf(),
            base_url: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(addr) = std::fs::read_to_string(data_dir.join("operator.addr"))
                && !addr.trim().is_empty()
            {
                op.base_url = format!("http://{}", addr.trim());
                return op;
            }
            if let Ok(Some(status)) = op.child.try_wait() {
                panic!("operator exited early with {status}; log:\n{}", op.log());
            }
            assert!(
                Instant::now() < deadline,
                "operator did not start; log:\n{}",
                op.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `127.0.0.1:PORT`, the address it listens on.
    pub fn addr(&self) -> String {
        self.base_url.trim_start_matches("http://").to_string()
    }

    /// The operator's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crash or the OOM killer would; waits for the exit.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("operator-test.log")).unwrap_or_default()
    }

    pub fn token(&self, sub: &str) -> String {
        let out = Command::new(operator_bin())
            .args(["token", "--sub", sub, "--data-dir"])
            .arg(&self.data_dir)
            .output()
            .expect("sless-operator token");
        assert!(
            out.status.success(),
            "token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "--- last lines of the operator log\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return; // already gone (killed by the test)
        }
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Terraform working directory wired to the built provider.
pub struct Tf {
    /// The working directory.
    pub dir: PathBuf,
    /// Environment of every terraform run.
    pub env: Vec<(String, String)>,
}

impl Tf {
    pub fn new(root: &Path, endpoint: &str, token: &str) -> Tf {
        let plugins = root.join("plugins");
        let home = root.join("home");
        let dir = root.join("work");
        for d in [&plugins, &home, &dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_terraform-provider-sless"),
            plugins.join("terraform-provider-sless"),
        )
        .unwrap();
        let rc = root.join("cli.tfrc");
        std::fs::write(
            &rc,
            format!(
                "provider_installation {{\n  dev_overrides {{\n    \"{SOURCE}\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
                plugins.display()
            ),
        )
        .unwrap();
        let env = vec![
            ("TF_CLI_CONFIG_FILE".into(), rc.display().to_string()),
            ("CHECKPOINT_DISABLE".into(), "1".into()),
            ("TF_IN_AUTOMATION".into(), "1".into()),
            ("HOME".into(), home.display().to_string()),
            ("SLESS_ENDPOINT".into(), endpoint.to_string()),
            ("SLESS_TOKEN".into(), token.to_string()),
            // The provider must cope with this machine's RUST_BACKTRACE=1.
            ("RUST_BACKTRACE".into(), "1".into()),
        ];
        Tf { dir, env }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let start = Instant::now();
        let out = Command::new(terraform_bin())
            .args(args)
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("TF_LOG")
            .env_remove("NUBES_ENDPOINT")
            .stdin(Stdio::null())
            .output()
            .expect("run terraform (set TERRAFORM or put it on PATH)");
        eprintln!(
            "terraform {} -> {:?} in {:.1}s",
            args.join(" "),
            out.status.code(),
            start.elapsed().as_secs_f32()
        );
        out
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "terraform {args:?} failed:\n{}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn apply(&self) -> String {
        self.ok(&["apply", "-auto-approve", "-input=false", "-no-color"])
    }

    /// `plan -detailed-exitcode`: 0 no changes, 2 changes.
    pub fn plan_code(&self) -> (i32, String) {
        let out = self.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
        (out.status.code().unwrap_or(-1), text(&out))
    }

    pub fn outputs(&self) -> Value {
        serde_json::from_str(&self.ok(&["output", "-json"])).expect("output -json")
    }

    pub fn write_main(&self, tf: &str) {
        std::fs::write(self.dir.join("main.tf"), tf).unwrap();
    }
}

/// A run's output for a failure message: stderr (Terraform's errors) first,
/// so a report cut to its first lines still shows why.
pub fn text(out: &Output) -> String {
    format!(
        "--- stderr\n{}\n--- stdout\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    )
}

/// The text with every run of whitespace collapsed to one space (Terraform
/// wraps long diagnostic lines).
pub fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn write(path: &Path, content: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A minimal pure-Python wheel `greetlib-1.0` with `greet(greeting, name)`.
/// Pids of processes whose environment holds every `NAME=value` of `vars`.
pub fn pids_with_env(vars: &[&str]) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let have: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        if vars.iter().all(|w| have.contains(&w.as_bytes())) {
            pids.push(pid);
        }
    }
    pids
}

/// Pids of processes whose environment says they run function `name` of `ns`.
pub fn function_pids(ns: &str, name: &str) -> Vec<u32> {
    pids_with_env(&[
        &format!("SLESS_NAMESPACE={ns}"),
        &format!("SLESS_FUNCTION={name}"),
    ])
}

/// Attribute names whose planned value differs from the prior one (known
/// changes and values that become unknown), from `terraform show -json`.
pub fn changed_attrs(change: &Value) -> (Vec<String>, Vec<String>) {
    let before = &change["before"];
    let after = &change["after"];
    let unknown = &change["after_unknown"];
    let mut known = Vec::new();
    let mut unknowns = Vec::new();
    if let Some(obj) = after.as_object() {
        for (k, v) in obj {
            if unknown[k] == Value::Bool(true) {
                unknowns.push(k.clone());
            } else if before[k] != *v {
                known.push(k.clone());
            }
        }
    }
    if let Some(obj) = unknown.as_object() {
        for (k, v) in obj {
            if *v == Value::Bool(true) && !unknowns.contains(k) {
                unknowns.push(k.clone());
            }
        }
    }
    known.sort();
    unknowns.sort();
    (known, unknowns)
}

/// The `terraform` block and a `provider "sless"` block waiting up to 300 s.
pub fn tf_header() -> String {
    tf_header_with("  wait_timeout_sec = 300\n")
}

/// The `terraform` block and a `provider "sless"` block holding `provider`
/// (lines of arguments, each ending with a newline).
pub fn tf_header_with(provider: &str) -> String {
    format!(
        "terraform {{\n  required_providers {{\n    sless = {{\n      source = \"{SOURCE}\"\n    }}\n  }}\n}}\n\nprovider \"sless\" {{\n{provider}}}\n"
    )
}

/// Polls `check` every 100 ms until it returns `Some`, panicking with `what`
/// after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One call of the operator's REST API with `token` (a JSON body when
/// given): the status and the answer as JSON (`null` when it is not JSON).
pub async fn api_json(
    op: &Operator,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}{path}", op.base_url);
    let mut rb = reqwest::Client::new()
        .request(method.clone(), &url)
        .bearer_auth(token);
    if let Some(b) = &body {
        rb = rb.json(b);
    }
    let r = rb
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Names of the objects the operator lists at `path` (a collection such as
/// `sless_wire::paths::functions(ns)`), sorted.
pub async fn object_names(op: &Operator, token: &str, path: &str) -> Vec<String> {
    let (status, body) = api_json(op, token, reqwest::Method::GET, path, None).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    let items = body
        .as_array()
        .or_else(|| body["items"].as_array())
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<String> = items
        .iter()
        .filter_map(|i| {
            i["name"]
                .as_str()
                .or_else(|| i["metadata"]["name"].as_str())
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}
