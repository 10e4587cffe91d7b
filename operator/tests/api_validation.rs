//! Bad-input matrix against the real operator binary: every validation rule,
//! malformed JSON, missing objects, duplicates, oversized / wrong / unsafe code
//! uploads. Each answer is a 4xx JSON error naming the field where there is
//! one, and the operator keeps serving afterwards.

mod support;

use serde_json::{Value, json};
use sha2::Digest as _;
use sless_wire::limits::CODE_ZIP_MAX_BYTES;
use sless_wire::paths;
use std::io::Write as _;
use support::{Client, Operator, status_json, zip_of};

fn valid() -> Value {
    json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler"})
}

fn with(field: &str, value: Value) -> Value {
    let mut v = valid();
    v[field] = value;
    v
}

fn without(field: &str) -> Value {
    let mut v = valid();
    v.as_object_mut().unwrap().remove(field);
    v
}

fn assert_field(what: &str, (code, body): (u16, Value), field: &str) {
    assert_eq!(code, 400, "{what}: expected 400, got {code} {body}");
    assert_eq!(
        body["error"]["field"], field,
        "{what}: the error should name {field}: {body}"
    );
    assert!(
        !body["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{what}: empty message"
    );
}

/// Sends a raw body to the create endpoint with the given content type.
async fn create_raw(c: &Client, content_type: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = c
        .req(reqwest::Method::POST, &paths::functions(&c.namespace))
        .body(body.to_string());
    if let Some(t) = content_type {
        req = req.header("content-type", t);
    }
    status_json(req.send().await.unwrap()).await
}

/// Uploads `zip` claiming `sha` as its sha256.
async fn upload_raw(c: &Client, name: &str, sha: &str, zip: Vec<u8>) -> (u16, Value) {
    let r = c
        .req(
            reqwest::Method::PUT,
            &paths::function_code(&c.namespace, name),
        )
        .query(&[("sha256", sha)])
        .header("content-type", "application/zip")
        .body(zip)
        .send()
        .await
        .unwrap();
    status_json(r).await
}

#[tokio::test]
async fn create_rules_name_the_field() {
    let op = Operator::start();
    let c = op.client("validator");
    c.ensure().await;

    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "unknown runtime",
            with("runtime", json!("ruby3.0")),
            "runtime",
        ),
        ("memory too small", with("memory_mb", json!(1)), "memory_mb"),
        (
            "memory too large",
            with("memory_mb", json!(99999)),
            "memory_mb",
        ),
        ("timeout 0", with("timeout_sec", json!(0)), "timeout_sec"),
        (
            "timeout 901",
            with("timeout_sec", json!(901)),
            "timeout_sec",
        ),
        ("bad name", with("name", json!("Bad_Name")), "name"),
        ("name too long", with("name", json!("a".repeat(64))), "name"),
        ("missing name", without("name"), "name"),
        ("missing runtime", without("runtime"), "runtime"),
        ("missing entrypoint", without("entrypoint"), "entrypoint"),
        (
            "entrypoint without function",
            with("entrypoint", json!("main")),
            "entrypoint",
        ),
        (
            "entrypoint traversal",
            with("entrypoint", json!("../x.handler")),
            "entrypoint",
        ),
        (
            "wrong type memory",
            with("memory_mb", json!("lots")),
            "memory_mb",
        ),
        ("wrong type name", with("name", json!(5)), "name"),
        (
            "wrong type env",
            with("env_vars", json!({"A": 1})),
            "env_vars.A",
        ),
        (
            "reserved env",
            with("env_vars", json!({"SLESS_X": "1"})),
            "env_vars.SLESS_X",
        ),
    ];
    for (what, body, field) in cases {
        let (code, resp) = c.create(body).await;
        assert_field(what, (code, resp.clone()), field);
        if what.starts_with("missing") {
            assert_eq!(resp["error"]["code"], "missing_field", "{what}: {resp}");
        }
    }
    // The rule is in the message, e.g. the supported runtimes and the bounds.
    let (_, body) = c.create(with("runtime", json!("ruby3.0"))).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("python3.11")
    );
    let (_, body) = c.create(with("memory_mb", json!(1))).await;
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("64") && msg.contains("4096"), "{msg}");

    // Malformed bodies: 400 JSON, never axum's 415/422 text.
    for (what, ct, body) in [
        ("invalid JSON", Some("application/json"), "{\"name\": "),
        ("not an object", Some("application/json"), "[1, 2]"),
        ("empty body", Some("application/json"), ""),
        ("missing content-type", None, "{}"),
        (
            "form content-type",
            Some("application/x-www-form-urlencoded"),
            "name=x",
        ),
    ] {
        let (code, resp) = create_raw(&c, ct, body).await;
        assert_eq!(code, 400, "{what}: {code} {resp}");
        assert_eq!(resp["error"]["code"], "bad_request", "{what}: {resp}");
    }
    // A JSON body over the limit: 413.
    let big = format!(
        "{{\"name\":\"x\",\"pad\":\"{}\"}}",
        "a".repeat(sless_wire::limits::JSON_BODY_MAX_BYTES)
    );
    let (code, resp) = create_raw(&c, Some("application/json"), &big).await;
    assert_eq!(code, 413, "{resp}");
    assert_eq!(resp["error"]["code"], "payload_too_large");

    // Nothing was created by all of that.
    let r = c
        .req(reqwest::Method::GET, &paths::functions(&c.namespace))
        .send()
        .await
        .unwrap();
    let (code, list) = status_json(r).await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{list}");

    // Duplicate create: 409.
    let (code, body) = c.create(valid()).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["phase"], "Pending");
    let (code, body) = c.create(valid()).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"]["code"], "already_exists");

    // Partial update validation: 400 naming the field, the function unchanged.
    for (what, patch, field) in [
        ("patch memory", json!({"memory_mb": 1}), "memory_mb"),
        ("patch timeout", json!({"timeout_sec": 901}), "timeout_sec"),
        ("patch runtime", json!({"runtime": "ruby3.0"}), "runtime"),
        (
            "patch entrypoint",
            json!({"entrypoint": "nodot"}),
            "entrypoint",
        ),
        ("patch type", json!({"timeout_sec": "slow"}), "timeout_sec"),
    ] {
        let r = c
            .req(
                reqwest::Method::PATCH,
                &paths::function(&c.namespace, "hello"),
            )
            .json(&patch)
            .send()
            .await
            .unwrap();
        assert_field(what, status_json(r).await, field);
    }
    let (code, body) = c.get("hello").await;
    assert_eq!(code, 200);
    assert_eq!(body["spec"]["memory_mb"], 128);
    assert_eq!(body["spec"]["timeout_sec"], 30);

    // A bad name in the path: 400 naming `name`.
    let (code, body) = c.get("Bad_Name").await;
    assert_field("path name", (code, body), "name");

    // Unknown endpoints and methods: JSON errors.
    let r = c
        .req(reqwest::Method::GET, "/v1/nothing-here")
        .send()
        .await
        .unwrap();
    let (code, body) = status_json(r).await;
    assert_eq!(code, 404);
    assert_eq!(body["error"]["code"], "not_found");
    let r = c
        .req(reqwest::Method::PUT, &paths::functions(&c.namespace))
        .send()
        .await
        .unwrap();
    let (code, body) = status_json(r).await;
    assert_eq!(code, 405);
    assert!(body["error"]["message"].is_string());

    still_serving(&op, &c, "after-create-rules").await;
}

#[tokio::test]
async fn missing_functions_are_404() {
    let op = Operator::start();
    let c = op.client("finder");
    c.ensure().await;
    let (code, body) = c.get("ghost").await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains("ghost"));

    let r = c
        .req(
            reqwest::Method::DELETE,
            &paths::function(&c.namespace, "ghost"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.0, 404);

    let r = c
        .req(
            reqwest::Method::PATCH,
            &paths::function(&c.namespace, "ghost"),
        )
        .json(&json!({"memory_mb": 256}))
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.0, 404);

    let (code, body) = c.invoke("ghost", &json!({"x": 1})).await;
    assert_eq!(code, 404, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    let r = c
        .req(
            reqwest::Method::GET,
            &format!("{}/a/b?c=d", paths::function_invoke(&c.namespace, "ghost")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.0, 404);

    let r = c
        .req(
            reqwest::Method::GET,
            &paths::function_logs(&c.namespace, "ghost"),
        )
        .query(&[("kind", "build")])
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.0, 404);

    let zip = zip_of(&[("main.py", "def handler(e, c):\n    return 1\n")]);
    let (code, _) = c.upload("ghost", zip).await;
    assert_eq!(code, 404);

    // Bad log query: 400 naming the parameter.
    c.create(valid()).await;
    let r = c
        .req(
            reqwest::Method::GET,
            &paths::function_logs(&c.namespace, "hello"),
        )
        .query(&[("kind", "everything")])
        .send()
        .await
        .unwrap();
    assert_field("log kind", status_json(r).await, "kind");
    let r = c
        .req(
            reqwest::Method::GET,
            &paths::function_logs(&c.namespace, "hello"),
        )
        .query(&[("tail", "-1")])
        .send()
        .await
        .unwrap();
    assert_field("log tail", status_json(r).await, "tail");

    // Delete then get: 404.
    let r = c
        .req(
            reqwest::Method::DELETE,
            &paths::function(&c.namespace, "hello"),
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, _) = c.get("hello").await;
        if code == 404 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {code} after delete"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A zip whose single entry is `size` bytes of zeros (a zip bomb when large),
/// written by Python's zlib, which is fast even in debug test builds.
fn zeros_zip(size_mib: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.zip");
    let script = "import sys, zipfile\n\
z = zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED, compresslevel=1)\n\
w = z.open('zeros.bin', 'w', force_zip64=True)\n\
chunk = bytes(1 << 20)\n\
for _ in range(int(sys.argv[2])):\n    w.write(chunk)\n\
w.close()\nz.close()\n";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&path)
        .arg(size_mib.to_string())
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&path).unwrap()
}

/// A zip with `n` empty files.
fn many_entries_zip(n: usize) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for i in 0..n {
            w.start_file(format!("f{i}.txt"), opts).unwrap();
        }
        w.finish().unwrap();
    }
    buf.into_inner()
}

/// A zip with one raw entry name, bypassing any sanitising by the writer.
fn zip_with_entry(name: &str) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        w.start_file("main.py", opts).unwrap();
        w.write_all(b"def handler(e, c):\n    return 1\n").unwrap();
        w.start_file(name, opts).unwrap();
        w.write_all(b"owned").unwrap();
        w.finish().unwrap();
    }
    buf.into_inner()
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn code_uploads_are_checked() {
    let op = Operator::start();
    let c = op.client("uploader");
    c.ensure().await;
    let (code, body) = c.create(valid()).await;
    assert_eq!(code, 201, "{body}");

    // Over the size limit: 413 (the body is streamed and counted, not trusted).
    let oversized = vec![0u8; CODE_ZIP_MAX_BYTES + 1];
    let (code, body) = upload_raw(&c, "hello", &sha(&oversized), oversized).await;
    assert_eq!(code, 413, "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large");

    let good = zip_of(&[("main.py", "def handler(e, c):\n    return 1\n")]);
    // Wrong sha256: 400 naming sha256.
    let (code, body) = upload_raw(&c, "hello", &"0".repeat(64), good.clone()).await;
    assert_field("wrong sha256", (code, body), "sha256");
    let (code, body) = upload_raw(&c, "hello", "xyz", good.clone()).await;
    assert_field("malformed sha256", (code, body), "sha256");
    // Missing sha256: 400 missing_field.
    let r = c
        .req(
            reqwest::Method::PUT,
            &paths::function_code(&c.namespace, "hello"),
        )
        .body(good.clone())
        .send()
        .await
        .unwrap();
    let (code, body) = status_json(r).await;
    assert_field("missing sha256", (code, body.clone()), "sha256");
    assert_eq!(body["error"]["code"], "missing_field");

    // Not a zip.
    let text = b"this is not a zip".to_vec();
    let (code, body) = upload_raw(&c, "hello", &sha(&text), text).await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("zip"),
        "{body}"
    );

    // Unsafe entries and bombs.
    let unsafe_zips = [
        ("dot-dot entry", zip_with_entry("../x"), "../x"),
        (
            "nested dot-dot entry",
            zip_with_entry("a/../../x"),
            "a/../../x",
        ),
        ("absolute entry", zip_with_entry("/etc/x"), "/etc/x"),
        (
            "too many entries",
            many_entries_zip(sless_wire::limits::CODE_ZIP_MAX_ENTRIES + 1),
            "entries",
        ),
        ("zip bomb", zeros_zip(600), "expands"),
    ];
    for (what, zip, needle) in unsafe_zips {
        let (code, body) = upload_raw(&c, "hello", &sha(&zip), zip).await;
        assert_eq!(code, 400, "{what}: {code} {body}");
        assert_eq!(body["error"]["field"], "code", "{what}: {body}");
        let msg = body["error"]["message"].as_str().unwrap_or("");
        assert!(
            msg.contains(needle),
            "{what}: {msg:?} should mention {needle:?}"
        );
    }
    // None of the rejected uploads reached the function.
    let (code, body) = c.get("hello").await;
    assert_eq!(code, 200);
    assert_eq!(body["status"]["phase"], "Pending", "{body}");
    assert!(body["status"].get("code_sha256").is_none(), "{body}");

    // A good upload is accepted: 202 with the function.
    let (code, body) = c.upload("hello", good.clone()).await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["status"]["code_sha256"], sha(&good));

    still_serving(&op, &c, "after-uploads").await;
}

/// The operator still answers /healthz and a valid create.
async fn still_serving(op: &Operator, c: &Client, name: &str) {
    let r = reqwest::get(format!("{}/healthz", op.base_url))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (code, body) = c.create(with("name", json!(name))).await;
    assert_eq!(code, 201, "{body}\n{}", op.log());
}
