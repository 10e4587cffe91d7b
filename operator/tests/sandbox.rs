//! Hostile user code against `--isolation strict` (the default), through the
//! real `sless-operator` binary, real Python and Node processes, real zips.
//!
//! A victim namespace deploys a function with a secret env var and code; an
//! attacker namespace then runs a probe — as a Python function, a Node
//! function, a job, a service, and inside a `pip install` and an
//! `npm install` of its dependencies — that tries to read the operator's key
//! and state database, the victim's code, env and logs, to see and signal the
//! operator's and the victim's processes, to write outside its private
//! `/tmp`, to connect to the victim's server past the proxy, to become root,
//! to fill its `/tmp` past the cap, and to fork without bound. Every probe
//! reports each attempt as `blocked: …` or `SUCCEEDED: …`; the tests assert
//! that every attempt was blocked and that the operator still serves the
//! victim afterwards. A function that allocates past `memory_mb` is killed
//! and said to be.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::{Phase, paths};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Client, Operator, zip_of};

const READY: Duration = Duration::from_secs(120);
const TMP_MB: u64 = 16;
const PIDS_MAX: u64 = 64;
/// The install steps' own caps (local/sandbox.rs `Settings`).
const BUILD_TMP_MB: u64 = 1024;
const BUILD_PIDS_MAX: u64 = 512;
const SECRET: &str = "victim-secret-5f1d2c";

/// The Python probe: `probe(cfg)` returns {attempt: "blocked: …" | "SUCCEEDED: …"}.
const PROBE_PY: &str = r#"import json, os, socket

def probe(cfg, fork=True):
    out = {}

    def attempt(name, fn):
        try:
            r = fn()
            out[name] = "SUCCEEDED: " + repr(r)[:300]
        except BaseException as e:
            out[name] = "blocked: %s: %s" % (type(e).__name__, e)

    def read(p):
        with open(p, "rb") as f:
            return f.read(64)

    attempt("read_key", lambda: read(cfg["key"]))
    attempt("read_state_db", lambda: read(cfg["state_db"]))
    attempt("read_victim_code", lambda: read(cfg["victim_code"]))
    attempt("read_victim_log", lambda: read(cfg["victim_log"]))
    attempt("read_victim_environ", lambda: read("/proc/%d/environ" % cfg["victim_pid"]))

    def find_secret():
        found = []
        import stat
        # Reversed in the config, so that the probe's own files do not hold it.
        secret = cfg["secret_reversed"][::-1].encode()
        for root in ["/proc", cfg["data_dir"], "/run", "/tmp"]:
            for dirpath, dirs, files in os.walk(root):
                # fd links may be pipes (a read would block); task repeats pids.
                dirs[:] = [d for d in dirs if d not in ("fd", "fdinfo", "task", "map_files", "sys")]
                if dirpath.count("/") > 8:
                    dirs[:] = []
                for f in files:
                    p = os.path.join(dirpath, f)
                    try:
                        if not stat.S_ISREG(os.stat(p).st_mode) or f in ("kcore", "kmsg", "pagemap"):
                            continue
                        with open(p, "rb") as fh:
                            if secret in fh.read(1 << 20):
                                found.append(p)
                    except OSError:
                        pass
        if found:
            return found
        raise LookupError("the victim's secret is nowhere to be read")
    attempt("find_victim_secret", find_secret)

    def see_operator():
        cmd = read("/proc/%d/cmdline" % cfg["operator_pid"])
        if b"sless-operator" in cmd:
            return cmd
        raise LookupError("pid %d is not the operator here: %r" % (cfg["operator_pid"], cmd))
    attempt("see_operator_process", see_operator)
    attempt("signal_operator", lambda: os.kill(cfg["operator_pid"], 0))
    attempt("signal_victim", lambda: os.kill(cfg["victim_pid"], 0))

    def foreign_processes():
        mine = []
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    mine.append(read("/proc/%s/cmdline" % p))
                except OSError:
                    pass
        # The operator's own command line: `sless-operator serve --listen …`.
        bad = [c for c in mine if b"\x00serve\x00" in c and b"sless-operator" in c]
        if bad or len(mine) > 40:
            return bad or mine
        raise LookupError("only %d processes of its own sandbox are visible" % len(mine))
    attempt("list_foreign_processes", foreign_processes)

    def write(p):
        with open(p, "w") as f:
            f.write("pwned")
        return p
    attempt("write_own_code", lambda: write(os.path.join(os.getcwd(), "pwned.txt")))
    attempt("write_usr", lambda: write("/usr/pwned"))
    attempt("write_etc", lambda: write("/etc/pwned"))
    attempt("write_data_dir", lambda: write(os.path.join(cfg["data_dir"], "pwned")))
    attempt("write_builds", lambda: write(os.path.join(cfg["data_dir"], "builds", "pwned")))
    attempt("write_runtime_server", lambda: write(cfg["runtime_server"]))
    attempt("write_root", lambda: write("/pwned"))

    def connect_victim():
        errors = []
        for path in cfg["victim_sockets"]:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(2)
            try:
                s.connect(path)
                return path
            except OSError as e:
                errors.append(str(e))
            finally:
                s.close()
        raise ConnectionError("; ".join(errors) or "no socket given")
    attempt("connect_victim_socket", connect_victim)
    if cfg.get("isolated_network", True):
        attempt("connect_operator_tcp",
                lambda: socket.create_connection(("127.0.0.1", cfg["operator_port"]), timeout=2).close())
    attempt("become_root", lambda: os.setuid(0))
    attempt("uid_is_not_root", lambda: (_ for _ in ()).throw(PermissionError("uid %d" % os.getuid())) if os.getuid() != 0 else "root")

    written = 0
    try:
        with open("/tmp/fill", "wb") as f:
            chunk = b"x" * (1 << 20)
            while written < 1024 * (1 << 20):
                f.write(chunk)
                f.flush()
                written += len(chunk)
    except OSError as e:
        out["tmp_full_error"] = str(e)
    finally:
        try:
            os.unlink("/tmp/fill")
        except OSError:
            pass
    out["tmp_bytes"] = written

    if fork:
        import time
        kids = []
        try:
            for _ in range(2000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(3)
                    os._exit(0)
                kids.append(pid)
        except OSError as e:
            out["fork_error"] = str(e)
        out["forks"] = len(kids)
        for k in kids:
            try:
                os.kill(k, 9)
                os.waitpid(k, 0)
            except OSError:
                pass
    return out
"#;

/// The Node probe (a function, and the install script of an npm dependency).
const PROBE_JS: &str = r#"const fs = require('fs');
const net = require('net');
const path = require('path');

async function probe(cfg) {
  const out = {};
  const attempt = async (name, fn) => {
    try {
      const r = await fn();
      out[name] = 'SUCCEEDED: ' + String(r).slice(0, 300);
    } catch (e) {
      out[name] = 'blocked: ' + e.message;
    }
  };
  const read = (p) => fs.readFileSync(p).subarray(0, 64).toString('hex');
  await attempt('read_key', () => read(cfg.key));
  await attempt('read_state_db', () => read(cfg.state_db));
  await attempt('read_victim_code', () => read(cfg.victim_code));
  await attempt('read_victim_log', () => read(cfg.victim_log));
  await attempt('read_victim_environ', () => read(`/proc/${cfg.victim_pid}/environ`));
  await attempt('signal_operator', () => { process.kill(cfg.operator_pid, 0); return 'sent'; });
  await attempt('signal_victim', () => { process.kill(cfg.victim_pid, 0); return 'sent'; });
  await attempt('list_foreign_processes', () => {
    const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p));
    if (pids.length > 40) return pids.join(',');
    for (const p of pids) {
      try {
        const c = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
        if (c.includes('sless-operator') && c.includes('\u0000serve\u0000')) return c;
      } catch (_) { /* gone */ }
    }
    throw new Error(`only ${pids.length} processes of its own sandbox are visible`);
  });
  const write = (p) => { fs.writeFileSync(p, 'pwned'); return p; };
  // An npm install writes its own output dir (its namespace's cache): that
  // is its job. Everything else stays out of reach.
  if (!cfg.cwd_is_output) {
    await attempt('write_own_code', () => write(path.join(process.cwd(), 'pwned.txt')));
  }
  await attempt('write_builds', () => write(path.join(cfg.data_dir, 'builds', 'pwned')));
  await attempt('write_usr', () => write('/usr/pwned'));
  await attempt('write_data_dir', () => write(path.join(cfg.data_dir, 'pwned')));
  await attempt('write_runtime_server', () => write(cfg.runtime_server));
  const connect = (opts) => new Promise((resolve, reject) => {
    const s = net.connect(opts);
    s.setTimeout(2000, () => { s.destroy(); reject(new Error('timed out')); });
    s.on('connect', () => { s.destroy(); resolve(JSON.stringify(opts)); });
    s.on('error', reject);
  });
  await attempt('connect_victim_socket', async () => {
    const errors = [];
    for (const p of cfg.victim_sockets) {
      try { return await connect({ path: p }); } catch (e) { errors.push(e.message); }
    }
    throw new Error(errors.join('; ') || 'no socket given');
  });
  if (cfg.isolated_network !== false) {
    await attempt('connect_operator_tcp', () => connect({ host: '127.0.0.1', port: cfg.operator_port }));
  }
  await attempt('uid_is_not_root', () => {
    if (process.getuid() === 0) return 'root';
    throw new Error(`uid ${process.getuid()}`);
  });
  return out;
}
module.exports = { probe };
"#;

/// What the probes need to know: the paths a hostile user would aim at.
struct Targets {
    cfg: Value,
}

fn victim_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        "import os\n\ndef handler(event, context):\n    print('victim ran', flush=True)\n    return {'victim': True, 'secret_len': len(os.environ['SECRET_TOKEN'])}\n",
    )])
}

/// Every unix socket under the operator's socket root.
fn all_sockets() -> Vec<String> {
    let mut out = Vec::new();
    let Ok(roots) = std::fs::read_dir("/run/sless") else {
        return out;
    };
    for root in roots.flatten() {
        for d in std::fs::read_dir(root.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let s = d.path().join("http.sock");
            if s.exists() {
                out.push(s.to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// The unix sockets of `op`'s processes: `/run/sless/<hash of its data dir>/*/http.sock`.
fn sockets_of(op: &Operator) -> Vec<String> {
    use sha2::Digest;
    let data_dir = op.data_dir.canonicalize().unwrap();
    let h = sha2::Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
    let root = Path::new("/run/sless").join(hex::encode(&h[..6]));
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("http.sock"))
        .filter(|s| s.exists())
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}

fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_file(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

/// Deploys the victim and gathers the targets.
async fn victim(op: &Operator, v: &Client) -> Targets {
    let (code, body) = v
        .create(
            json!({"name": "secret-fn", "runtime": "python3.11", "entrypoint": "main.handler",
                        "env_vars": {"SECRET_TOKEN": SECRET}}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = v.upload("secret-fn", victim_zip()).await;
    assert_eq!(code, 202, "{body}");
    v.wait_phase("secret-fn", Phase::Ready, READY).await;
    let (code, body) = v.invoke("secret-fn", &json!({})).await;
    assert_eq!(code, 200, "{body}");
    let data_dir = op.data_dir.canonicalize().unwrap();
    let builds = data_dir.join("builds").join(&v.namespace).join("secret-fn");
    let victim_code = find_file(&builds, "main.py").expect("the victim's code on disk");
    let victim_pid = support::runtime_pid(&v.namespace, "secret-fn").expect("the victim's process");
    let sockets = all_sockets();
    assert!(!sockets.is_empty(), "the victim serves on a unix socket");
    let port: u16 = op
        .base_url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap();
    Targets {
        cfg: json!({
            "data_dir": data_dir,
            "key": data_dir.join("jwt-hs256.key"),
            "state_db": data_dir.join("state.db"),
            "victim_code": victim_code,
            "victim_log": data_dir.join("logs").join(&v.namespace).join("secret-fn").join("run.log"),
            "victim_pid": victim_pid,
            "victim_sockets": sockets,
            "operator_pid": op.child.as_ref().unwrap().id(),
            "operator_port": port,
            "runtime_server": data_dir.join("runtimes").join("server.py"),
            "secret_reversed": SECRET.chars().rev().collect::<String>(),
        }),
    }
}

/// Asserts every attempt of a probe report was blocked, and the tmp and
/// fork limits held.
fn assert_all_blocked(what: &str, report: &Value, tmp_mb: u64, pids_max: Option<u64>) {
    eprintln!("{what}: {report}");
    let obj = report
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no report: {report}"));
    let mut attempts = 0;
    for (k, v) in obj {
        if let Some(s) = v.as_str()
            && (s.starts_with("blocked") || s.starts_with("SUCCEEDED"))
        {
            attempts += 1;
            assert!(
                s.starts_with("blocked"),
                "{what}: {k} {s}\nfull report: {report:#}"
            );
        }
    }
    assert!(attempts >= 10, "{what}: too few attempts in {report:#}");
    if let Some(bytes) = report["tmp_bytes"].as_u64() {
        assert!(
            bytes <= tmp_mb << 20,
            "{what}: wrote {bytes} bytes to /tmp past its {tmp_mb} MiB cap: {report:#}"
        );
        assert!(
            report["tmp_full_error"]
                .as_str()
                .is_some_and(|e| e.contains("No space")),
            "{what}: {report:#}"
        );
    }
    if let Some(max) = pids_max {
        let forks = report["forks"].as_u64().unwrap_or(u64::MAX);
        assert!(
            forks < max,
            "{what}: {forks} forks with pids.max {max}: {report:#}"
        );
        assert!(report["fork_error"].is_string(), "{what}: {report:#}");
    }
}

fn attacker_py_zip(t: &Targets, main: &str) -> Vec<u8> {
    zip_of(&[
        ("probe.py", PROBE_PY),
        ("config.json", &t.cfg.to_string()),
        ("main.py", main),
    ])
}

fn start_operator() -> Operator {
    Operator::start_with(&[
        "--sandbox-tmp-mb",
        &TMP_MB.to_string(),
        "--sandbox-pids-max",
        &PIDS_MAX.to_string(),
    ])
}

async fn victim_still_served(v: &Client, op: &Operator) {
    let (code, body) = v.invoke("secret-fn", &json!({})).await;
    assert_eq!(
        code,
        200,
        "the victim is still served: {body}\n{}",
        op.log()
    );
    assert!(body.contains("\"victim\": true"), "{body}");
}

const FUNCTION_MAIN: &str = "import json\nfrom probe import probe\n\ndef handler(event, context):\n    with open('config.json') as f:\n        cfg = json.load(f)\n    return probe(cfg)\n";

#[tokio::test]
async fn hostile_python_and_node_functions_are_contained() {
    let op = start_operator();
    let v = op.client("sandbox-victim");
    let a = op.client("sandbox-attacker");
    let t = victim(&op, &v).await;

    let (code, body) = a
        .create(
            json!({"name": "hostile", "runtime": "python3.11", "entrypoint": "main.handler",
                        "memory_mb": 256, "timeout_sec": 120}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = a
        .upload("hostile", attacker_py_zip(&t, FUNCTION_MAIN))
        .await;
    assert_eq!(code, 202, "{body}");
    a.wait_phase("hostile", Phase::Ready, READY).await;
    let (code, text) = a.invoke("hostile", &json!({})).await;
    assert_eq!(
        code,
        200,
        "{text}\nrun log:\n{}",
        a.logs("hostile", "run").await
    );
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_all_blocked("python function", &report, TMP_MB, Some(PIDS_MAX));
    victim_still_served(&v, &op).await;

    let js_main = "const fs = require('fs');\nconst { probe } = require('./probe.js');\nexports.handler = async () => probe(JSON.parse(fs.readFileSync('config.json', 'utf8')));\n";
    let (code, body) = a
        .create(
            json!({"name": "hostile-js", "runtime": "nodejs20", "entrypoint": "index.handler",
                        "memory_mb": 256}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let zip = zip_of(&[
        ("probe.js", PROBE_JS),
        ("config.json", &t.cfg.to_string()),
        ("index.js", js_main),
    ]);
    let (code, body) = a.upload("hostile-js", zip).await;
    assert_eq!(code, 202, "{body}");
    a.wait_phase("hostile-js", Phase::Ready, READY).await;
    let (code, text) = a.invoke("hostile-js", &json!({})).await;
    assert_eq!(
        code,
        200,
        "{text}\nrun log:\n{}",
        a.logs("hostile-js", "run").await
    );
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_all_blocked("node function", &report, TMP_MB, None);
    victim_still_served(&v, &op).await;

    // Nothing was written where the probes tried.
    let data_dir = op.data_dir.canonicalize().unwrap();
    for p in [
        data_dir.join("pwned"),
        PathBuf::from("/usr/pwned"),
        PathBuf::from("/etc/pwned"),
        PathBuf::from("/pwned"),
    ] {
        assert!(!p.exists(), "{} was written", p.display());
    }
    let server = std::fs::read_to_string(data_dir.join("runtimes").join("server.py")).unwrap();
    assert!(!server.contains("pwned"));
}

#[tokio::test]
async fn memory_past_memory_mb_kills_only_that_function() {
    let op = start_operator();
    let v = op.client("sandbox-victim");
    let a = op.client("sandbox-hog");
    victim(&op, &v).await;
    let hog = "def handler(event, context):\n    hog = []\n    for _ in range(64):\n        hog.append(bytearray(16 * 1024 * 1024))\n    return len(hog)\n";
    let (code, body) = a
        .create(
            json!({"name": "hog", "runtime": "python3.11", "entrypoint": "main.handler",
                        "memory_mb": 64}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = a.upload("hog", zip_of(&[("main.py", hog)])).await;
    assert_eq!(code, 202, "{body}");
    a.wait_phase("hog", Phase::Ready, READY).await;
    let (code, text) = a.invoke("hog", &json!({})).await;
    assert_eq!(code, 502, "a killed process is a 502: {text}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let run = a.logs("hog", "run").await;
        if run.contains("exceeds memory_mb 64") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no memory kill in the run log:\n{run}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    victim_still_served(&v, &op).await;
}

#[tokio::test]
async fn a_hostile_job_and_service_are_contained() {
    let op = start_operator();
    let v = op.client("sandbox-victim");
    let a = op.client("sandbox-attacker");
    let t = victim(&op, &v).await;

    // A job: the report is its result.
    let (code, body) = a
        .call(
            Method::POST,
            &paths::jobs(&a.namespace),
            Some(
                json!({"name": "hostile-job", "runtime": "python3.11", "entrypoint": "main.handler",
                        "memory_mb": 256, "timeout_sec": 120}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = a
        .put_code(
            &paths::job_code(&a.namespace, "hostile-job"),
            attacker_py_zip(&t, FUNCTION_MAIN),
        )
        .await;
    assert_eq!(code, 202, "{body}");
    let deadline = Instant::now() + READY;
    let job = loop {
        let (_, body) = a
            .call(Method::GET, &paths::job(&a.namespace, "hostile-job"), None)
            .await;
        if body["status"]["observed_generation"] == 2
            && matches!(
                body["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
        {
            break body;
        }
        assert!(Instant::now() < deadline, "job not done: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(job["status"]["phase"], "Succeeded", "{job}");
    let report: Value = serde_json::from_str(job["status"]["message"].as_str().unwrap()).unwrap();
    assert_all_blocked("job", &report, TMP_MB, Some(PIDS_MAX));
    victim_still_served(&v, &op).await;

    // A service: the user's own server runs the probe on GET.
    let app = r#"import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer
from probe import probe

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            body = b"ok"
        else:
            with open("config.json") as f:
                body = json.dumps(probe(json.load(f))).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

HTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
"#;
    let (code, body) = a
        .call(
            Method::POST,
            &paths::services(&a.namespace),
            Some(
                json!({"name": "hostile-svc", "runtime": "python3.11", "entrypoint": "app.py",
                        "health_path": "/healthz", "memory_mb": 256, "timeout_sec": 120}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let url = body["status"]["url"].as_str().unwrap().to_string();
    let zip = zip_of(&[
        ("probe.py", PROBE_PY),
        ("config.json", &t.cfg.to_string()),
        ("app.py", app),
    ]);
    let (code, body) = a
        .put_code(&paths::service_code(&a.namespace, "hostile-svc"), zip)
        .await;
    assert_eq!(code, 202, "{body}");
    let deadline = Instant::now() + READY;
    loop {
        let (_, body) = a
            .call(
                Method::GET,
                &paths::service(&a.namespace, "hostile-svc"),
                None,
            )
            .await;
        match body["status"]["phase"].as_str() {
            Some("Ready") => break,
            Some("Failed") => panic!("service failed: {body}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "service not ready: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = reqwest::get(format!("{url}/probe")).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let report: Value = r.json().await.unwrap();
    assert_all_blocked("service", &report, TMP_MB, Some(PIDS_MAX));
    victim_still_served(&v, &op).await;
}

#[tokio::test]
async fn hostile_pip_and_npm_install_steps_are_contained() {
    let op = start_operator();
    let v = op.client("sandbox-victim");
    let a = op.client("sandbox-attacker");
    let t = victim(&op, &v).await;
    // The install steps keep the host network (they reach package
    // registries); the operator's API is a public, token-checked endpoint.
    let mut cfg = t.cfg.clone();
    cfg["isolated_network"] = json!(false);

    // pip: an in-tree build backend of a local package runs the probe and
    // fails with its report, which pip prints into the build log.
    let backend = "import json\nfrom probe import probe\n\ndef get_requires_for_build_wheel(config_settings=None):\n    with open('config.json') as f:\n        cfg = json.load(f)\n    raise RuntimeError('PROBE:' + json.dumps(probe(cfg)))\n\ndef build_wheel(*a, **k):\n    raise RuntimeError('never')\n";
    let pyproject = "[build-system]\nrequires = []\nbuild-backend = \"evil_backend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"evil\"\nversion = \"1.0\"\n";
    let cfg_text = cfg.to_string();
    let zip = zip_of(&[
        ("main.py", "def handler(e, c):\n    return 1\n"),
        ("requirements.txt", "./evilpkg\n"),
        ("evilpkg/pyproject.toml", pyproject),
        ("evilpkg/evil_backend.py", backend),
        ("evilpkg/probe.py", PROBE_PY),
        ("evilpkg/config.json", &cfg_text),
    ]);
    let (code, body) = a
        .create(json!({"name": "evil-pip", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = a.upload("evil-pip", zip).await;
    assert_eq!(code, 202, "{body}");
    let f = a.wait_phase("evil-pip", Phase::Failed, READY).await;
    let log = a.logs("evil-pip", "build").await;
    let report =
        report_in(&log).unwrap_or_else(|| panic!("no probe report in the build log: {f}\n{log}"));
    assert_all_blocked("pip install", &report, BUILD_TMP_MB, Some(BUILD_PIDS_MAX));
    victim_still_served(&v, &op).await;

    // npm: the install script of a file: dependency (it runs in the
    // install's output dir).
    cfg["cwd_is_output"] = json!(true);
    let cfg_text = cfg.to_string();
    let script = "const fs = require('fs');\nconst { probe } = require('./probe.js');\nprobe(JSON.parse(fs.readFileSync(__dirname + '/config.json', 'utf8'))).then((r) => {\n  console.error('PROBE:' + JSON.stringify(r));\n  process.exit(1);\n});\n";
    let zip = zip_of(&[
        ("index.js", "exports.handler = async () => 1;\n"),
        (
            "package.json",
            r#"{"name": "app", "version": "1.0.0", "dependencies": {"evil": "file:evil"}}"#,
        ),
        (
            "evil/package.json",
            r#"{"name": "evil", "version": "1.0.0", "scripts": {"install": "node install.js"}}"#,
        ),
        ("evil/install.js", script),
        ("evil/probe.js", PROBE_JS),
        ("evil/config.json", &cfg_text),
    ]);
    let (code, body) = a
        .create(json!({"name": "evil-npm", "runtime": "nodejs20", "entrypoint": "index.handler"}))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = a.upload("evil-npm", zip).await;
    assert_eq!(code, 202, "{body}");
    let f = a.wait_phase("evil-npm", Phase::Failed, READY).await;
    let log = a.logs("evil-npm", "build").await;
    let report =
        report_in(&log).unwrap_or_else(|| panic!("no probe report in the build log: {f}\n{log}"));
    assert_all_blocked("npm install", &report, BUILD_TMP_MB, None);
    victim_still_served(&v, &op).await;
}

/// The JSON after `PROBE:` in a log (pip may quote it inside a traceback line).
fn report_in(log: &str) -> Option<Value> {
    let start = log.find("PROBE:{")? + "PROBE:".len();
    let rest = &log[start..];
    let mut de = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    de.next()?.ok()
}

#[tokio::test]
async fn healthz_warns_without_isolation() {
    let op = Operator::start_with(&["--isolation", "none"]);
    let body = reqwest::get(format!("{}/healthz", op.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.starts_with("ok\n"), "{body}");
    assert!(body.contains("WARNING: isolation none"), "{body}");
    assert!(op.log().contains("isolation none"), "{}", op.log());
    let strict = Operator::start();
    let body = reqwest::get(format!("{}/healthz", strict.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "ok\n");
}

#[test]
fn strict_refuses_to_start_without_what_it_needs() {
    // No bwrap on PATH: the operator says what is missing and how to go on.
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::operator_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tmp.path())
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--isolation strict"), "{err}");
    assert!(
        err.contains("bubblewrap") && err.contains("--isolation none"),
        "{err}"
    );
}

/// Host pids of every process whose environment names namespace `ns`.
fn processes_of(ns: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if String::from_utf8_lossy(&env)
            .split('\0')
            .any(|kv| kv == format!("SLESS_NAMESPACE={ns}"))
        {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn timeouts_and_deletes_leave_nothing_of_a_sandbox_behind() {
    let op = start_operator();
    let a = op.client("sandbox-leftovers");
    // A job past its timeout: failed, saying so, and its whole tree gone.
    let (code, body) = a
        .call(
            Method::POST,
            &paths::jobs(&a.namespace),
            Some(
                json!({"name": "sleeper", "runtime": "python3.11", "entrypoint": "main.handler",
                        "timeout_sec": 2}),
            ),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let sleeper = "import os, time\n\ndef handler(event, context):\n    if os.fork() == 0:\n        time.sleep(120)\n    time.sleep(120)\n";
    let (code, body) = a
        .put_code(
            &paths::job_code(&a.namespace, "sleeper"),
            zip_of(&[("main.py", sleeper)]),
        )
        .await;
    assert_eq!(code, 202, "{body}");
    let deadline = Instant::now() + READY;
    let job = loop {
        let (_, body) = a
            .call(Method::GET, &paths::job(&a.namespace, "sleeper"), None)
            .await;
        if body["status"]["phase"] == "Failed" {
            break body;
        }
        assert!(Instant::now() < deadline, "job not failed: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let error = job["status"]["error"].as_str().unwrap_or("");
    assert!(error.contains("timed out after 2 s"), "{error}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_of(&a.namespace).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left: {:?}",
            processes_of(&a.namespace)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A function with a forked child: delete takes the whole tree, the
    // socket dir and the cgroup.
    let (code, body) = a
        .create(json!({"name": "forker", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    assert_eq!(code, 201, "{body}");
    let forker = "import os, time\nif os.fork() == 0:\n    time.sleep(600)\n    os._exit(0)\n\ndef handler(event, context):\n    return 'up'\n";
    let (code, body) = a.upload("forker", zip_of(&[("main.py", forker)])).await;
    assert_eq!(code, 202, "{body}");
    a.wait_phase("forker", Phase::Ready, READY).await;
    assert_eq!(a.invoke("forker", &json!({})).await.0, 200);
    assert!(
        processes_of(&a.namespace).len() >= 2,
        "the server and its child run"
    );
    let (code, _) = a
        .call(
            Method::DELETE,
            &paths::function(&a.namespace, "forker"),
            None,
        )
        .await;
    assert_eq!(code, 204);
    let deadline = Instant::now() + Duration::from_secs(15);
    let own_sockets = || sockets_of(&op);
    while !processes_of(&a.namespace).is_empty() || !own_sockets().is_empty() {
        assert!(
            Instant::now() < deadline,
            "left: {:?} {:?}",
            processes_of(&a.namespace),
            own_sockets()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
