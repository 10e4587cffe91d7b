//! MISSION's parallel case through the real `sless-operator` binary: three
//! functions created and uploaded at once, one of them with a slow dependency
//! build (a local package whose in-tree PEP 517 backend takes a minute, so it
//! stays hermetic: no index is contacted). It is deleted while building: the
//! other two reach Ready and answer, and nothing of the deleted one remains:
//! no process, no build or dependency dir, no stored code, no logs, 404.

mod support;

use serde_json::json;
use sless_wire::Phase;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Client, Operator, node_hello_zip, python_hello_zip, zip_of};

const READY: Duration = Duration::from_secs(90);

const SLOW_BACKEND: &str = r#"import base64, hashlib, os, time, zipfile

FILES = {
    "slowdep/__init__.py": b"VALUE = 'from slowdep'\n",
    "slowdep-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: slowdep\nVersion: 1.0\n",
    "slowdep-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: slowbackend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    time.sleep(60)
    name = "slowdep-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        record = ""
        for path, data in FILES.items():
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record += f"{path},sha256={digest},{len(data)}\n"
        z.writestr("slowdep-1.0.dist-info/RECORD", record + "slowdep-1.0.dist-info/RECORD,,\n")
    return name
"#;

fn slow_zip() -> Vec<u8> {
    zip_of(&[
        (
            "main.py",
            "import slowdep\n\ndef handler(event, context):\n    return slowdep.VALUE\n",
        ),
        ("requirements.txt", "./slowpkg\n"),
        (
            "slowpkg/pyproject.toml",
            "[build-system]\nrequires = []\nbuild-backend = \"slowbackend\"\nbackend-path = [\".\"]\n",
        ),
        ("slowpkg/slowbackend.py", SLOW_BACKEND),
    ])
}

/// Pids of live processes whose working directory or command line mentions
/// `needle` (a path under the data dir).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            continue;
        }
        let cwd = std::fs::read_link(e.path().join("cwd"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if cwd.starts_with(needle) || cmdline.contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// Total bytes and entry names under `dir` (empty when missing).
fn snapshot(dir: &Path) -> (u64, Vec<PathBuf>) {
    let mut total = 0;
    let mut names = Vec::new();
    for e in walkdir::WalkDir::new(dir).into_iter().flatten() {
        total += e.metadata().map(|m| m.len()).unwrap_or(0);
        names.push(e.path().to_path_buf());
    }
    names.sort();
    (total, names)
}

async fn create_and_upload(c: &Client, name: &str, runtime: &str, entry: &str, zip: Vec<u8>) {
    let (code, body) = c
        .create(json!({"name": name, "runtime": runtime, "entrypoint": entry}))
        .await;
    assert_eq!(code, 201, "create {name}: {body}");
    let (code, body) = c.upload(name, zip).await;
    assert_eq!(code, 202, "upload {name}: {body}");
}

#[tokio::test]
async fn three_at_once_one_deleted_while_building() {
    let op = Operator::start();
    let c = op.client("parallel-user");
    c.ensure().await;
    let data_dir = op.data_dir.canonicalize().unwrap();
    tokio::join!(
        create_and_upload(
            &c,
            "alpha",
            "python3.11",
            "main.handler",
            python_hello_zip()
        ),
        create_and_upload(&c, "beta", "nodejs20", "index.handler", node_hello_zip()),
        create_and_upload(&c, "slow", "python3.11", "main.handler", slow_zip()),
    );

    // Wait until the slow build is really running (its backend process works
    // inside the build dir), then delete it.
    let slow_build = data_dir.join("builds").join(&c.namespace).join("slow");
    let needle = slow_build.to_string_lossy().into_owned();
    let deadline = Instant::now() + READY;
    loop {
        let (_, body) = c.get("slow").await;
        assert_eq!(body["status"]["phase"], "Building", "{body}");
        if !processes_mentioning(&needle).is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slow build never started; build log:\n{}",
            c.logs("slow", "build").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let build_log = c.logs("slow", "build").await;
    assert!(build_log.contains("pip install"), "{build_log}");
    let r = c
        .req(
            reqwest::Method::DELETE,
            &sless_wire::paths::function(&c.namespace, "slow"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);

    // The other two reach Ready and answer.
    c.wait_phase("alpha", Phase::Ready, READY).await;
    c.wait_phase("beta", Phase::Ready, READY).await;
    let (code, text) = c.invoke("alpha", &json!({"name": "a"})).await;
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("hello, a"), "{text}");
    let (code, text) = c.invoke("beta", &json!({"name": "b"})).await;
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("hello, b"), "{text}");

    // Nothing of the deleted one remains.
    let (code, _) = c.get("slow").await;
    assert_eq!(code, 404);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the deleted build survive: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !slow_build.exists(),
        "build dir left: {}",
        slow_build.display()
    );
    assert!(
        !data_dir
            .join("logs")
            .join(&c.namespace)
            .join("slow")
            .exists()
    );
    let deps = data_dir.join("deps").join("python");
    let tmp_left: Vec<_> = std::fs::read_dir(&deps)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        tmp_left.iter().all(|n| !n.starts_with(".tmp-")),
        "a half-installed dependency dir is left: {tmp_left:?}"
    );
    let code_dir = data_dir.join("code");
    let zips = std::fs::read_dir(&code_dir).unwrap().flatten().count();
    assert_eq!(zips, 2, "only alpha's and beta's code is stored");
    // And nothing keeps growing.
    let before = (
        snapshot(&data_dir.join("builds")),
        snapshot(&deps),
        snapshot(&code_dir),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = (
        snapshot(&data_dir.join("builds")),
        snapshot(&deps),
        snapshot(&code_dir),
    );
    assert_eq!(before, after, "the data dir changed after the delete");
}
