//! A real `sless-operator` (release build) on `127.0.0.1:0` with its own data dir,
//! and a client for the REST calls the benchmark needs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sless_wire::function::{Function, Phase};

use super::error::{BenchError, Result, io};
use super::http;

/// The isolation an operator started here gets by default (strict when run
/// as root, where bubblewrap's namespaces are available; `none` otherwise):
/// its name and the `serve` arguments that select it.
pub fn default_isolation() -> (&'static str, &'static [&'static str]) {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        ("strict", &[])
    } else {
        ("none", &["--isolation", "none"])
    }
}

/// A running operator; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Operator {
    child: Child,
    /// The operator binary.
    pub bin: PathBuf,
    /// Its data dir.
    pub data_dir: PathBuf,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Operator {
    /// Starts `bin serve --isolation none` with a fresh `data_dir` and waits
    /// for `operator.addr` (sections 2, 4 and 5: their figures are about the
    /// operator's work, not the sandbox's; sections 1 and 6 start their own
    /// operator with the default isolation when run as root).
    pub fn start(bin: &Path, data_dir: &Path) -> Result<Operator> {
        Self::start_with(bin, data_dir, &["--isolation", "none"])
    }

    /// Starts `bin serve` with extra arguments and a fresh `data_dir`.
    pub fn start_with(bin: &Path, data_dir: &Path, extra: &[&str]) -> Result<Operator> {
        Self::start_wrapped(&[], bin, data_dir, extra)
    }

    /// Like [`Operator::start_with`], run under `wrapper` (e.g. `valgrind
    /// --tool=callgrind`; then [`Operator::pid`] is the wrapper's pid, which
    /// valgrind keeps as the operator's own).
    pub fn start_wrapped(
        wrapper: &[String],
        bin: &Path,
        data_dir: &Path,
        extra: &[&str],
    ) -> Result<Operator> {
        if data_dir.exists() {
            std::fs::remove_dir_all(data_dir).map_err(io("remove", data_dir))?;
        }
        std::fs::create_dir_all(data_dir).map_err(io("create", data_dir))?;
        let log_path = data_dir.join("operator.log");
        let log = std::fs::File::create(&log_path).map_err(io("create", &log_path))?;
        let log2 = log.try_clone().map_err(io("open", &log_path))?;
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let child = cmd
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|source| crate::Error::Spawn {
                program: wrapper
                    .first()
                    .cloned()
                    .unwrap_or_else(|| bin.display().to_string()),
                source,
            })?;
        let mut op = Operator {
            child,
            bin: bin.to_owned(),
            data_dir: data_dir.to_owned(),
            addr: String::new(),
        };
        let addr_file = data_dir.join("operator.addr");
        // Under valgrind the start takes many times longer.
        let wait_secs = if wrapper.is_empty() { 30 } else { 180 };
        let deadline = Instant::now() + Duration::from_secs(wait_secs);
        loop {
            if let Ok(a) = std::fs::read_to_string(&addr_file) {
                let a = a.trim();
                if !a.is_empty() && http::request(a, "GET", "/healthz", &[], b"").is_ok() {
                    op.addr = a.to_owned();
                    return Ok(op);
                }
            }
            if let Ok(Some(status)) = op.child.try_wait() {
                return Err(BenchError::RunFailed(format!(
                    "the operator exited ({status}); see {}",
                    log_path.display()
                )));
            }
            if Instant::now() > deadline {
                return Err(BenchError::Timeout {
                    what: format!("{}", addr_file.display()),
                    secs: wait_secs,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The operator's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Mints a token for `sub` and returns a client for its namespace (ensured).
    pub fn client(&self, sub: &str) -> Result<Client> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["token", "--sub", sub, "--data-dir"])
            .arg(&self.data_dir);
        let token = crate::cmd::stdout_text(&mut cmd)?.trim().to_owned();
        let client = Client {
            addr: self.addr.clone(),
            auth: format!("Bearer {token}"),
            ns: sless_wire::namespace_for_sub(sub),
            data_dir: self.data_dir.clone(),
        };
        client.call(
            "POST",
            &sless_wire::paths::ensure_namespace(&client.ns),
            None,
            b"",
        )?;
        Ok(client)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// REST calls in one namespace with one token.
pub struct Client {
    /// `127.0.0.1:PORT` of the operator.
    pub addr: String,
    /// `Bearer …`.
    pub auth: String,
    /// The namespace of the token's `sub`.
    pub ns: String,
    data_dir: PathBuf,
}

impl Client {
    /// One authenticated call; fails unless the answer is 2xx.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<http::Response> {
        let mut headers = vec![("Authorization", self.auth.as_str())];
        if let Some(ct) = content_type {
            headers.push(("Content-Type", ct));
        }
        let r = http::request(&self.addr, method, path, &headers, body)?;
        if !r.is_success() {
            return Err(BenchError::Http {
                method: method.to_owned(),
                path: path.to_owned(),
                reason: format!("status {}: {}", r.status, r.text()),
            });
        }
        Ok(r)
    }

    fn json(&self, method: &str, path: &str, body: &serde_json::Value) -> Result<http::Response> {
        self.call(
            method,
            path,
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    }

    /// Creates a function (no code yet).
    pub fn create_function(&self, name: &str, runtime: &str, entrypoint: &str) -> Result<()> {
        let body = serde_json::json!({"name": name, "runtime": runtime, "entrypoint": entrypoint});
        self.json("POST", &sless_wire::paths::functions(&self.ns), &body)?;
        Ok(())
    }

    /// Creates a function with extra spec fields (e.g. `min_instances`).
    pub fn create_function_with(
        &self,
        name: &str,
        runtime: &str,
        entrypoint: &str,
        extra: serde_json::Value,
    ) -> Result<()> {
        let mut body =
            serde_json::json!({"name": name, "runtime": runtime, "entrypoint": entrypoint});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        self.json("POST", &sless_wire::paths::functions(&self.ns), &body)?;
        Ok(())
    }

    /// Uploads a code zip.
    pub fn upload_code(&self, name: &str, zip: &[u8], source_hash: &str) -> Result<()> {
        let sha = hex::encode(Sha256::digest(zip));
        let path = format!(
            "{}?sha256={sha}&source_hash={source_hash}",
            sless_wire::paths::function_code(&self.ns, name)
        );
        self.call("PUT", &path, Some("application/zip"), zip)?;
        Ok(())
    }

    /// Reads a function.
    pub fn get_function(&self, name: &str) -> Result<Function> {
        let path = sless_wire::paths::function(&self.ns, name);
        let r = self.call("GET", &path, None, b"")?;
        serde_json::from_slice(&r.body).map_err(|e| BenchError::Http {
            method: "GET".into(),
            path,
            reason: format!("not a Function: {e}"),
        })
    }

    /// Deletes a function.
    pub fn delete_function(&self, name: &str) -> Result<()> {
        self.call(
            "DELETE",
            &sless_wire::paths::function(&self.ns, name),
            None,
            b"",
        )?;
        Ok(())
    }

    /// Polls every 10 ms until the function is Ready; fails on Failed or timeout.
    pub fn wait_ready(&self, name: &str, timeout: Duration) -> Result<Function> {
        let deadline = Instant::now() + timeout;
        loop {
            let f = self.get_function(name)?;
            match f.status.phase {
                Phase::Ready => return Ok(f),
                Phase::Failed => {
                    let log = self.build_log(name).unwrap_or_default();
                    return Err(BenchError::RunFailed(format!(
                        "function {name} failed: {}\n{log}",
                        f.status.message.unwrap_or_default()
                    )));
                }
                _ => {}
            }
            if Instant::now() > deadline {
                return Err(BenchError::Timeout {
                    what: format!(
                        "function {name} to be Ready (last phase {:?})",
                        f.status.phase
                    ),
                    secs: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The build log.
    pub fn build_log(&self, name: &str) -> Result<String> {
        let path = format!(
            "{}?kind=build",
            sless_wire::paths::function_logs(&self.ns, name)
        );
        Ok(self.call("GET", &path, None, b"")?.text())
    }

    /// The invoke path of a function.
    pub fn invoke_path(&self, name: &str) -> String {
        sless_wire::paths::function_invoke(&self.ns, name)
    }

    /// POSTs a JSON body through the authenticated invoke endpoint.
    pub fn invoke(&self, name: &str, body: &str) -> Result<http::Response> {
        self.call(
            "POST",
            &self.invoke_path(name),
            Some("application/json"),
            body.as_bytes(),
        )
    }

    /// Creates an http trigger for `function` and returns its public path.
    pub fn create_http_trigger(&self, name: &str, function: &str) -> Result<String> {
        let body = serde_json::json!({"name": name, "function": function, "type": "http"});
        self.json("POST", &sless_wire::paths::triggers(&self.ns), &body)?;
        Ok(sless_wire::paths::trigger_public(&self.ns, name))
    }

    /// `(pid, port)` of a function's process from `<data-dir>/run/<ns>/<name>.pid`.
    pub fn process(&self, name: &str) -> Result<(u32, u16)> {
        let path = self
            .data_dir
            .join("run")
            .join(&self.ns)
            .join(format!("{name}.pid"));
        // The pid file is written right after the phase turns Ready.
        let deadline = Instant::now() + Duration::from_secs(5);
        let text = loop {
            match std::fs::read_to_string(&path) {
                Ok(t) if parse_pid_file(&t).is_some() => break t,
                Ok(t) if Instant::now() > deadline => break t,
                Err(e) if Instant::now() > deadline => return Err(io("read", &path)(e)),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        parse_pid_file(&text).ok_or_else(|| BenchError::Parse {
            tool: "pid file",
            reason: format!("{} holds `{}`, not `PID PORT`", path.display(), text.trim()),
        })
    }
}

/// Reads `PID PORT` from a pid file.
pub fn parse_pid_file(text: &str) -> Option<(u32, u16)> {
    let mut it = text.split_whitespace();
    let pid = it.next()?.parse().ok()?;
    let port = it.next()?.parse().ok()?;
    Some((pid, port))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pid_file_is_pid_then_port() {
        assert_eq!(super::parse_pid_file("123 4567\n"), Some((123, 4567)));
        assert_eq!(super::parse_pid_file("123"), None);
    }
}
