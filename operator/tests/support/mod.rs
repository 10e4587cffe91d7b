//! Test support: start the real `sless-operator` binary on a loopback port with
//! a temporary data dir, mint tokens with its `token` subcommand, build zips,
//! and wait for phases. Shared by every integration test of the operator.
#![allow(dead_code)]

use sless_wire::Phase;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Path of the operator binary cargo built for these tests.
pub fn operator_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sless-operator"))
}

/// A running operator process and its data dir.
pub struct Operator {
    /// The child process (None while stopped).
    pub child: Option<Child>,
    /// Its data dir (kept across restarts).
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    /// `http://127.0.0.1:PORT`
    pub base_url: String,
    /// Extra arguments passed to `serve`.
    pub extra_args: Vec<String>,
    /// Extra environment variables of the process.
    pub env: Vec<(String, String)>,
    /// Where the process's stdout and stderr go (appended across restarts).
    pub log_path: PathBuf,
}

impl Operator {
    /// Starts an operator with a fresh temporary data dir.
    pub fn start() -> Operator {
        Self::start_with(&[])
    }

    /// Starts an operator with `--isolation none`, for tests whose user
    /// code writes side-effect files or its pid where the test reads them:
    /// the strict sandbox (rightly) allows neither. What the sandbox does
    /// is tested in `tests/sandbox.rs`.
    pub fn start_unsandboxed() -> Operator {
        Self::start_with(&["--isolation", "none"])
    }

    /// Starts an operator with extra `serve` arguments.
    pub fn start_with(extra: &[&str]) -> Operator {
        Self::start_with_env(extra, &[])
    }

    /// Starts an operator with extra `serve` arguments and environment.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Operator {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut op = Operator {
            child: None,
            data_dir: tmp.path().to_path_buf(),
            log_path: tmp.path().join("operator-test.log"),
            _tmp: Some(tmp),
            base_url: String::new(),
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        op.spawn();
        op
    }

    /// Starts an operator on a data dir the caller owns (kept after it stops),
    /// logging to `log_path` (outside the data dir, so a full data dir does
    /// not silence the log).
    pub fn start_in(data_dir: &Path, log_path: &Path, extra: &[&str]) -> Operator {
        let mut op = Operator {
            child: None,
            data_dir: data_dir.to_path_buf(),
            log_path: log_path.to_path_buf(),
            _tmp: None,
            base_url: String::new(),
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
        };
        op.spawn();
        op
    }

    /// (Re)starts the process on a new port with the same data dir, and waits
    /// until `/healthz` answers.
    pub fn spawn(&mut self) {
        let addr_file = self.data_dir.join("operator.addr");
        let _ = std::fs::remove_file(&addr_file);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("operator log");
        let child = Command::new(operator_bin())
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.extra_args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn sless-operator");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(addr) = std::fs::read_to_string(&addr_file) {
                let addr = addr.trim();
                if !addr.is_empty() {
                    self.base_url = format!("http://{addr}");
                    if blocking_get(&format!("{}/healthz", self.base_url)) == Some(200) {
                        return;
                    }
                }
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("operator exited early with {status}; log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "operator did not come up in 30 s; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The operator's own log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Mints a token for `sub` with `sless-operator token`.
    pub fn token(&self, sub: &str) -> String {
        self.token_with(sub, &[])
    }

    /// Mints a token with extra arguments, e.g. `["--ttl", "1s"]`.
    pub fn token_with(&self, sub: &str, extra: &[&str]) -> String {
        let out = Command::new(operator_bin())
            .arg("token")
            .arg("--sub")
            .arg(sub)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(extra)
            .output()
            .expect("run sless-operator token");
        assert!(
            out.status.success(),
            "token failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("utf8")
            .trim()
            .to_string()
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("operator did not stop within 20 s of SIGTERM");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Kills the process with SIGKILL (a crash), without cleanup.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// An API client for `sub`'s namespace.
    pub fn client(&self, sub: &str) -> Client {
        Client {
            base_url: self.base_url.clone(),
            token: self.token(sub),
            namespace: sless_wire::namespace_for_sub(sub),
            http: reqwest::Client::new(),
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.stop_quietly();
    }
}

impl Operator {
    fn stop_quietly(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            for _ in 0..200 {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn blocking_get(url: &str) -> Option<u16> {
    // A tiny HTTP/1.0 GET so startup polling needs no runtime.
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}")))?;
    let mut s = std::net::TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut buf = String::new();
    std::io::Read::read_to_string(&mut s, &mut buf).ok()?;
    buf.split_whitespace().nth(1)?.parse().ok()
}

/// A client bound to one user's token and namespace.
pub struct Client {
    /// Operator base URL.
    pub base_url: String,
    /// Bearer token.
    pub token: String,
    /// The user's namespace.
    pub namespace: String,
    /// The HTTP client.
    pub http: reqwest::Client,
}

impl Client {
    /// `base_url + path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// A request with the bearer token set.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .bearer_auth(&self.token)
    }

    /// Ensures the namespace exists.
    pub async fn ensure(&self) {
        let r = self
            .req(
                reqwest::Method::POST,
                &sless_wire::paths::ensure_namespace(&self.namespace),
            )
            .send()
            .await
            .expect("ensure");
        assert!(r.status().is_success(), "ensure: {}", r.status());
    }

    /// Creates a function; returns the status and body.
    pub async fn create(&self, body: serde_json::Value) -> (u16, serde_json::Value) {
        let r = self
            .req(
                reqwest::Method::POST,
                &sless_wire::paths::functions(&self.namespace),
            )
            .json(&body)
            .send()
            .await
            .expect("create");
        status_json(r).await
    }

    /// Uploads a function's zip; returns the status and body.
    pub async fn upload(&self, name: &str, zip: Vec<u8>) -> (u16, serde_json::Value) {
        self.put_code(
            &sless_wire::paths::function_code(&self.namespace, name),
            zip,
        )
        .await
    }

    /// PUTs a zip with its sha256 to a code path (of a function, job or
    /// service); returns the status and body.
    pub async fn put_code(&self, path: &str, zip: Vec<u8>) -> (u16, serde_json::Value) {
        use sha2::Digest;
        let sha = hex::encode(sha2::Sha256::digest(&zip));
        let r = self
            .req(reqwest::Method::PUT, path)
            .query(&[("sha256", sha)])
            .header("content-type", "application/zip")
            .body(zip)
            .send()
            .await
            .expect("upload");
        status_json(r).await
    }

    /// Sends `method path` with an optional JSON body; returns the status and
    /// the JSON body (Null when not JSON).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self.req(method, path);
        if let Some(b) = body {
            req = req.json(&b);
        }
        status_json(req.send().await.expect("request")).await
    }

    /// Reads a function; returns the status and body.
    pub async fn get(&self, name: &str) -> (u16, serde_json::Value) {
        let r = self
            .req(
                reqwest::Method::GET,
                &sless_wire::paths::function(&self.namespace, name),
            )
            .send()
            .await
            .expect("get");
        status_json(r).await
    }

    /// Invokes a function with a JSON body; returns the status and body text.
    pub async fn invoke(&self, name: &str, body: &serde_json::Value) -> (u16, String) {
        let r = self
            .req(
                reqwest::Method::POST,
                &sless_wire::paths::function_invoke(&self.namespace, name),
            )
            .json(body)
            .send()
            .await
            .expect("invoke");
        let status = r.status().as_u16();
        (status, r.text().await.unwrap_or_default())
    }

    /// Reads a log (`build` or `run`).
    pub async fn logs(&self, name: &str, kind: &str) -> String {
        self.req(
            reqwest::Method::GET,
            &sless_wire::paths::function_logs(&self.namespace, name),
        )
        .query(&[("kind", kind)])
        .send()
        .await
        .expect("logs")
        .text()
        .await
        .unwrap_or_default()
    }

    /// Polls until the function reaches `phase` (or Failed), panicking with the
    /// last status and the build log after `timeout`.
    pub async fn wait_phase(
        &self,
        name: &str,
        phase: Phase,
        timeout: Duration,
    ) -> serde_json::Value {
        let deadline = Instant::now() + timeout;
        let want = phase.as_str();
        loop {
            let (code, body) = self.get(name).await;
            let seen = body["status"]["phase"].as_str().unwrap_or("").to_string();
            if code == 200 && seen == want {
                return body;
            }
            if code == 200 && seen == "Failed" && want != "Failed" {
                panic!(
                    "function {name} Failed: {}\nbuild log:\n{}",
                    body["status"]["message"],
                    self.logs(name, "build").await
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "function {name} not {want} after {timeout:?}; last seen {code} {body}\nbuild log:\n{}",
                    self.logs(name, "build").await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Status code and JSON body (Null when the body is not JSON).
pub async fn status_json(r: reqwest::Response) -> (u16, serde_json::Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

/// Builds a zip in memory from `(path, contents)` pairs.
pub fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (path, contents) in files {
            w.start_file(*path, opts).expect("zip entry");
            w.write_all(contents.as_bytes()).expect("zip write");
        }
        w.finish().expect("zip finish");
    }
    buf.into_inner()
}

/// A Python hello function's zip: `main.handler` returns a greeting built from
/// the event's `name` and the `GREETING` env var (default "hello").
pub fn python_hello_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        "import os\n\ndef handler(event, context):\n    body = event.get('body') or {}\n    return {'message': os.environ.get('GREETING', 'hello') + ', ' + str(body.get('name', 'world')), 'runtime': 'python'}\n",
    )])
}

/// A Node hello function's zip, the same contract as [`python_hello_zip`].
pub fn node_hello_zip() -> Vec<u8> {
    zip_of(&[(
        "index.js",
        "exports.handler = async (event, context) => {\n  const body = event.body || {};\n  return { message: (process.env.GREETING || 'hello') + ', ' + (body.name || 'world'), runtime: 'node' };\n};\n",
    )])
}

/// Reads a file under the data dir.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Host pids of the runtime servers (`server.py` / `server.js`) whose
/// environment has `SLESS_FUNCTION=name` and `SLESS_NAMESPACE=ns`.
pub fn runtime_pids(ns: &str, name: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let env = String::from_utf8_lossy(&env);
        let has = |kv: &str| env.split('\0').any(|x| x == kv);
        if has(&format!("SLESS_FUNCTION={name}")) && has(&format!("SLESS_NAMESPACE={ns}")) {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            if (cmd.contains("server.py") || cmd.contains("server.js")) && !stat.contains(") Z ") {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Host pid of the runtime server of `ns/name` (see [`runtime_pids`]).
pub fn runtime_pid(ns: &str, name: &str) -> Option<u32> {
    runtime_pids(ns, name).into_iter().next()
}
