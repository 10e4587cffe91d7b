//! A real S3-compatible server for tests: PyPI `moto[server]` started on a
//! free loopback port (installed with pip when missing; if it cannot be
//! installed the caller is told loudly and skips).

#![allow(dead_code)]

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running moto server; killed on drop.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have_moto() -> bool {
    Command::new("moto_server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts moto on a free loopback port with a fresh bucket, or `None` (with
/// a loud message) when it cannot be installed.
pub async fn moto(bucket: &str) -> Option<Moto> {
    if !have_moto() {
        let ok = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "moto[server]"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok || !have_moto() {
            eprintln!(
                "\n!!!! SKIPPED: moto[server] is not installed and `pip install 'moto[server]'` failed; \
                 the S3 code-store tests did NOT run !!!!\n"
            );
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server");
    let endpoint = format!("http://127.0.0.1:{port}");
    let m = Moto { child, endpoint };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "moto_server did not listen within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // moto accepts unsigned requests: create the bucket.
    let resp = reqwest::Client::new()
        .put(format!("{}/{bucket}", m.endpoint))
        .send()
        .await
        .unwrap();
    assert!(
        resp.status().is_success(),
        "create bucket: {}",
        resp.status()
    );
    Some(m)
}
