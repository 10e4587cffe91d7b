//! Storage faults with the real `sless-operator` binary: its data dir runs
//! out of space (a small tmpfs filled to the last byte), and its state
//! database is corrupt at start. What a user must see: a clear answer naming
//! the cause (507, or a start-up error naming the file), never a 500, never a
//! silent reset, nothing already stored damaged, and service again once the
//! cause is gone. (SIGKILL of the operator during `terraform apply` is
//! `provider/tests/faults.rs`.)

mod support;

use serde_json::json;
use sha2::{Digest, Sha256};
use sless_wire::Phase;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{Client, Operator, python_hello_zip, zip_of};

const READY: Duration = Duration::from_secs(90);

/// A tmpfs of a fixed size mounted for one test, unmounted on drop.
struct SmallDisk {
    mountpoint: PathBuf,
    _parent: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a `size_mb` tmpfs, or says why it cannot (not root, no mount).
    fn mount(size_mb: u32) -> Result<SmallDisk, String> {
        let parent = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let mountpoint = parent.path().join("data");
        std::fs::create_dir(&mountpoint).map_err(|e| format!("mkdir: {e}"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m,mode=0755")])
            .arg("sless-faults")
            .arg(&mountpoint)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallDisk {
            mountpoint,
            _parent: parent,
        })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .status();
    }
}

/// Writes zeroes to `path` until the file system says it is full; returns
/// the bytes written.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).expect("create the filler");
    let block = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // The last partial page too.
    while let Ok(n) = f.write(&[0u8; 512]) {
        if n == 0 {
            break;
        }
        written += n as u64;
    }
    written
}

/// A zip no compressor shrinks: `size` pseudo-random bytes in a module.
fn incompressible_zip(size: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: String = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 90) as u8)
        })
        .collect();
    let module = format!(
        "BLOB = {data:?}\n\ndef handler(event, context):\n    return {{'blob': len(BLOB)}}\n"
    );
    zip_of(&[("main.py", &module)])
}

fn assert_disk_full_answer(what: &str, code: u16, body: &serde_json::Value, op: &Operator) {
    assert_eq!(
        code,
        507,
        "{what} on a full disk: want 507, got {code} {body}\noperator log:\n{}",
        op.log()
    );
    assert_eq!(body["error"]["code"], "insufficient_storage", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("out of disk space"), "{body}");
    assert!(
        !message.contains(&op.data_dir.display().to_string()),
        "paths stay out of API answers: {body}"
    );
}

async fn deploy(c: &Client, name: &str, zip: Vec<u8>) -> serde_json::Value {
    let (code, body) = c
        .create(
            json!({"name": name, "runtime": "python3.11", "entrypoint": "main.handler",
                       "min_instances": 1}),
        )
        .await;
    assert_eq!(code, 201, "create {name}: {body}");
    let (code, body) = c.upload(name, zip).await;
    assert!((200..300).contains(&code), "upload {name}: {code} {body}");
    c.wait_phase(name, Phase::Ready, READY).await
}

async fn invoke_ok(c: &Client, name: &str, op: &Operator) -> serde_json::Value {
    let (code, text) = c.invoke(name, &json!({"name": "disk"})).await;
    assert_eq!(code, 200, "{name}: {text}\noperator log:\n{}", op.log());
    serde_json::from_str(&text).expect("a JSON answer")
}

/// After a restart a `min_instances = 1` function is Ready while its
/// process starts again, answering 503 meanwhile: invoke until 200.
async fn invoke_after_restart(c: &Client, name: &str, op: &Operator) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, text) = c.invoke(name, &json!({"name": "disk"})).await;
        if code == 200 {
            return serde_json::from_str(&text).expect("a JSON answer");
        }
        assert_eq!(code, 503, "only 503 while it restarts: {text}");
        assert!(
            std::time::Instant::now() < deadline,
            "{name} did not answer within 30 s of the restart: {code} {text}\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Code blobs in the store, each checked against its name.
fn stored_blobs(data_dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(data_dir.join("code")).expect("code dir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".tmp"),
            "a half-written upload was left in the code store: {name}"
        );
        let sha = name.strip_suffix(".zip").expect("only zips").to_string();
        let bytes = std::fs::read(e.path()).expect("read blob");
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            sha,
            "the blob {name} is whole"
        );
        names.push(sha);
    }
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_data_dir_refuses_writes_with_507_keeps_serving_and_recovers() {
    let disk = match SmallDisk::mount(64) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("SKIPPED: the full-disk test needs a tmpfs mount (root): {why}");
            return;
        }
    };
    let data = disk.mountpoint.clone();
    let log_dir = tempfile::tempdir().expect("log dir");
    let log = log_dir.path().join("operator.log");
    let mut op = Operator::start_in(&data, &log, &[]);
    let c = op.client("disk-user");
    c.ensure().await;

    let kept = deploy(&c, "keep", python_hello_zip()).await;
    let kept_sha = kept["status"]["code_sha256"]
        .as_str()
        .expect("code_sha256")
        .to_string();
    assert_eq!(invoke_ok(&c, "keep", &op).await["message"], "hello, disk");
    let blobs_before = stored_blobs(&data);

    let filler = data.join("filler");
    let filled = fill(&filler);
    eprintln!("filled the data dir with {} KiB", filled / 1024);

    // A create is a row in the database: it either fits in the space sqlite
    // already holds (201, and then it is really there) or is refused with
    // 507. Never a 500.
    let (code, body) = c
        .create(json!({"name": "new", "runtime": "python3.11", "entrypoint": "main.handler"}))
        .await;
    let created = match code {
        201 => true,
        _ => {
            assert_disk_full_answer("create", code, &body, &op);
            false
        }
    };
    if created {
        // 4 MiB of code cannot fit anywhere.
        let (code, body) = c.upload("new", incompressible_zip(4 << 20)).await;
        assert_disk_full_answer("upload", code, &body, &op);
        let (code, body) = c.get("new").await;
        assert_eq!(code, 200, "{body}");
        assert_ne!(
            body["status"]["phase"], "Ready",
            "no code, no Ready: {body}"
        );
    }
    // A code update of the running function: refused, and the function keeps
    // its old code and keeps answering.
    let (code, body) = c.upload("keep", incompressible_zip(4 << 20)).await;
    assert_disk_full_answer("code update", code, &body, &op);
    let (code, body) = c.get("keep").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["code_sha256"], kept_sha.as_str(), "{body}");
    assert_eq!(body["status"]["phase"], "Ready", "{body}");
    for _ in 0..20 {
        assert_eq!(invoke_ok(&c, "keep", &op).await["message"], "hello, disk");
    }
    assert_eq!(
        stored_blobs(&data),
        blobs_before,
        "nothing stored changed, no partial blob"
    );
    assert!(!op.log().contains("panicked"), "{}", op.log());

    // Space returns: the same requests now succeed.
    std::fs::remove_file(&filler).expect("remove the filler");
    if created {
        let (code, body) = c.upload("new", python_hello_zip()).await;
        assert!((200..300).contains(&code), "upload after: {code} {body}");
        c.wait_phase("new", Phase::Ready, READY).await;
        assert_eq!(invoke_ok(&c, "new", &op).await["message"], "hello, disk");
    }
    let after = deploy(&c, "after", incompressible_zip(1 << 20)).await;
    assert_eq!(invoke_ok(&c, "after", &op).await["blob"], 1 << 20);
    let after_sha = after["status"]["code_sha256"]
        .as_str()
        .expect("code_sha256")
        .to_string();

    // And all of it survives a restart on the same data dir.
    op.stop();
    op.spawn();
    let c = Client {
        base_url: op.base_url.clone(),
        ..c
    };
    let (_, body) = c.get("keep").await;
    assert_eq!(body["status"]["code_sha256"], kept_sha.as_str(), "{body}");
    c.wait_phase("keep", Phase::Ready, READY).await;
    assert_eq!(
        invoke_after_restart(&c, "keep", &op).await["message"],
        "hello, disk"
    );
    let (_, body) = c.get("after").await;
    assert_eq!(body["status"]["code_sha256"], after_sha.as_str(), "{body}");
    assert_eq!(
        invoke_after_restart(&c, "after", &op).await["blob"],
        1 << 20
    );
    let blobs = stored_blobs(&data);
    assert!(
        blobs.contains(&kept_sha) && blobs.contains(&after_sha),
        "{blobs:?}"
    );
    op.stop();
    drop(disk);
}

#[test]
fn a_corrupt_state_database_stops_the_start_with_its_name_and_is_left_untouched() {
    let data = tempfile::tempdir().expect("data dir");
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let db = data.path().join("state.db");
    std::fs::write(&db, &garbage).expect("write garbage");

    let out = Command::new(support::operator_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--isolation", "none"])
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .expect("run the operator");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "operator on a corrupt state.db: {}: {}",
        out.status,
        stderr.trim()
    );
    assert!(!out.status.success(), "it must not start: {stderr}");
    assert!(
        stderr.contains("state.db") && stderr.contains("corrupt"),
        "the error names the file and the cause: {stderr}"
    );
    assert!(
        !stderr.contains("internal error"),
        "a damaged file is the user's to fix, not an internal fault: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read(&db).expect("read back"),
        garbage,
        "the file is left as it was"
    );
    assert!(
        !data.path().join("operator.addr").exists(),
        "it never listened"
    );
}

#[test]
fn a_data_dir_in_use_or_a_locked_state_database_is_a_clear_start_error() {
    let op = Operator::start_unsandboxed();
    let serve = |data_dir: &Path| {
        let mut child = Command::new(support::operator_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--isolation", "none"])
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run the operator");
        // It must give up by itself, not wait forever on the lock.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                let mut stderr = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr)
                    .expect("read stderr");
                eprintln!("second operator: {status}: {}", stderr.trim());
                return (status, stderr);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("a second operator on a locked data dir still runs after 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // A second operator on a data dir another one serves.
    let (status, stderr) = serve(&op.data_dir);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("in use"),
        "says the data dir is in use: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(op);

    // A state database another program holds an exclusive lock on.
    let data = tempfile::tempdir().expect("data dir");
    let db = data.path().join("state.db");
    let mut holder = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('CREATE TABLE IF NOT EXISTS other (x)')\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             c.execute('INSERT INTO other VALUES (1)')\n\
             print('locked', flush=True)\n\
             time.sleep(120)\n",
        )
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().expect("stdout")),
        &mut line,
    )
    .expect("read");
    assert_eq!(line.trim(), "locked");
    let (status, stderr) = serve(data.path());
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("state.db") && stderr.contains("locked"),
        "names the file and the lock: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
