//! Unsandboxed (`--isolation none`), functions serve on unix sockets of the
//! operator's, not on loopback TCP ports another local user could call
//! without a token: a fresh start, a Python cold start forked from the
//! zygote and a Node cold start taken from the warm pool each get a socket
//! of their own in `<data-dir>/run/sockets` (0700), listen on no TCP port,
//! answer through the proxy, and leave no socket file behind when they stop.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use sless_wire::{Phase, paths};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Client, Operator, zip_of};

const READY: Duration = Duration::from_secs(90);

fn python_zip() -> Vec<u8> {
    zip_of(&[(
        "main.py",
        "import os\n\ndef handler(event, context):\n    return {\"pid\": os.getpid(), \"socket\": os.environ.get(\"SLESS_SOCKET\")}\n",
    )])
}

fn node_zip() -> Vec<u8> {
    zip_of(&[(
        "index.js",
        "exports.handler = async () => ({ pid: process.pid, socket: process.env.SLESS_SOCKET || null });\n",
    )])
}

async fn deploy(c: &Client, name: &str, runtime: &str, entrypoint: &str, zip: Vec<u8>) {
    let (code, b) = c
        .create(json!({
            "name": name, "runtime": runtime, "entrypoint": entrypoint,
            "idle_timeout_sec": 2,
        }))
        .await;
    assert_eq!(code, 201, "create {name}: {b}");
    let (code, b) = c.upload(name, zip).await;
    assert!((200..300).contains(&code), "upload {name}: {code} {b}");
    c.wait_phase(name, Phase::Ready, READY).await;
}

async fn invoke(c: &Client, name: &str) -> Value {
    let (code, text) = c.invoke(name, &json!({})).await;
    assert_eq!(code, 200, "invoke {name}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// The socket files in `dir`.
fn sockets_in(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// The inodes of the TCP sockets listening on this machine.
fn listening_tcp_inodes() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // st 0A = LISTEN; the inode is the tenth field.
            if f.len() > 9 && f[3] == "0A" {
                out.insert(f[9].to_string());
            }
        }
    }
    out
}

/// True when process `pid` holds a listening TCP socket.
fn listens_on_tcp(pid: u64) -> bool {
    let listening = listening_tcp_inodes();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .any(|inode| listening.contains(&inode))
}

/// Checks an answer came from a process serving on its own socket in `dir`.
fn assert_on_a_socket(what: &str, answer: &Value, dir: &Path) -> PathBuf {
    let socket = PathBuf::from(answer["socket"].as_str().unwrap_or_else(|| {
        panic!("{what}: no SLESS_SOCKET: {answer}");
    }));
    assert_eq!(socket.parent(), Some(dir), "{what}: {answer}");
    assert!(socket.exists(), "{what}: {} is not there", socket.display());
    let pid = answer["pid"].as_u64().expect("a pid");
    assert!(!listens_on_tcp(pid), "{what}: pid {pid} listens on TCP");
    socket
}

async fn wait_at_zero(c: &Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, f) = c.get(name).await;
        if f["status"]["instances"].as_u64() == Some(0) {
            return;
        }
        assert!(Instant::now() < deadline, "{name} not at zero: {f}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `dir` holds no socket file.
async fn wait_empty(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sockets_in(dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "socket files left: {:?}",
            sockets_in(dir)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsandboxed_functions_serve_on_private_unix_sockets() {
    let op = Operator::start_unsandboxed();
    let c = op.client("socket-user");
    c.ensure().await;
    let dir = op.data_dir.join("run").join("sockets");
    deploy(&c, "py", "python3.11", "main.handler", python_zip()).await;
    deploy(&c, "js", "nodejs20", "index.handler", node_zip()).await;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{} is private", dir.display());

    // 1. Fresh starts: one socket each, no TCP port.
    let py = invoke(&c, "py").await;
    let js = invoke(&c, "js").await;
    let first = [
        assert_on_a_socket("python, fresh", &py, &dir),
        assert_on_a_socket("node, fresh", &js, &dir),
    ];
    assert_ne!(first[0], first[1]);
    assert_eq!(sockets_in(&dir), first.iter().cloned().collect());

    // 2. At zero the processes and their sockets are gone.
    wait_at_zero(&c, "py").await;
    wait_at_zero(&c, "js").await;
    wait_empty(&dir).await;

    // 3. Cold starts (the zygote's fork, a warm Node process) get new ones.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let py2 = invoke(&c, "py").await;
    let js2 = invoke(&c, "js").await;
    assert_ne!(py2["pid"], py["pid"], "a new python process");
    assert_ne!(js2["pid"], js["pid"], "a new node process");
    let cold = [
        assert_on_a_socket("python, cold", &py2, &dir),
        assert_on_a_socket("node, cold", &js2, &dir),
    ];
    for s in &cold {
        assert!(!first.contains(s), "{} was handed out twice", s.display());
    }
    let run_log = c.logs("py", "run").await;
    assert!(run_log.contains("cold start"), "run log: {run_log}");

    // 4. Deleted, they leave nothing behind.
    for name in ["py", "js"] {
        let (code, b) = c
            .call(Method::DELETE, &paths::function(&c.namespace, name), None)
            .await;
        assert!((200..300).contains(&code), "delete {name}: {code} {b}");
    }
    wait_empty(&dir).await;
}
