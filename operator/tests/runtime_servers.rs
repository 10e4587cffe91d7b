//! The runtime servers (`server.py`, `server.js`) spoken to directly, as the
//! supervisor does: real interpreters, fixture code, real HTTP. Checks the
//! handler contract (docs/handler-contract.md) and the runtime protocol
//! (docs/runtime-protocol.md) for both languages.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lang {
    Python,
    Node,
}

const PY_FIXTURE: &str = r#"
import asyncio, base64, sys

def echo(event, context):
    return {"event": event, "context": dict(context)}

def one(event):
    return ["one", event["method"]]

async def slow(event, context):
    await asyncio.sleep(0.05)
    return {"async": True, "rid": context.requestId}

def text(event, context):
    return {"statusCode": 201, "body": "created", "headers": {"X-Custom": "yes"}}

def jsonbody(event, context):
    return {"statusCode": 404, "body": {"missing": True}}

def binary(event, context):
    return {"statusCode": 200, "body": base64.b64encode(bytes([0, 1, 2, 255])).decode(),
            "isBase64Encoded": True, "headers": {"content-type": "image/png"}}

def nothing(event, context):
    print("printed to stdout")
    return None

def boom(event, context):
    raise ValueError("kaput")

not_callable = 42
"#;

const JS_FIXTURE: &str = r#"
exports.echo = (event, context) => ({ event, context });
exports.one = (event) => ['one', event.method];
exports.slow = async (event, context) => {
  await new Promise((r) => setTimeout(r, 50));
  return { async: true, rid: context.requestId };
};
exports.text = () => ({ statusCode: 201, body: 'created', headers: { 'X-Custom': 'yes' } });
exports.jsonbody = () => ({ statusCode: 404, body: { missing: true } });
exports.binary = () => ({
  statusCode: 200,
  body: Buffer.from([0, 1, 2, 255]).toString('base64'),
  isBase64Encoded: true,
  headers: { 'content-type': 'image/png' },
});
exports.nothing = () => { console.log('printed to stdout'); return undefined; };
exports.boom = async () => { throw new RangeError('kaput'); };
exports.not_callable = 42;
"#;

struct Fixture {
    _tmp: tempfile::TempDir,
    code: PathBuf,
    server_py: PathBuf,
    server_js: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let rt = sless_operator::runtimes::install(tmp.path()).unwrap();
    let code = tmp.path().join("code");
    std::fs::create_dir_all(code.join("esm")).unwrap();
    std::fs::create_dir_all(code.join("pkg")).unwrap();
    std::fs::write(code.join("main.py"), PY_FIXTURE).unwrap();
    std::fs::write(code.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(
        code.join("pkg/deep.py"),
        "def handler(e):\n    return 'deep'\n",
    )
    .unwrap();
    std::fs::write(code.join("index.js"), JS_FIXTURE).unwrap();
    std::fs::write(
        code.join("mod.mjs"),
        "export async function handler(event) { return { esm: 'mjs', method: event.method }; }\n",
    )
    .unwrap();
    std::fs::write(code.join("esm/package.json"), r#"{"type": "module"}"#).unwrap();
    std::fs::write(
        code.join("esm/app.js"),
        "export const handler = () => ({ esm: 'type-module' });\n",
    )
    .unwrap();
    std::fs::write(
        code.join("esm/tla.js"),
        "await new Promise((r) => setTimeout(r, 10));\nexport const handler = () => 'top-level await';\n",
    )
    .unwrap();
    std::fs::write(
        code.join("legacy.cjs"),
        "module.exports = { handler: () => 'cjs' };\n",
    )
    .unwrap();
    Fixture {
        code,
        server_py: rt.python,
        server_js: rt.node,
        _tmp: tmp,
    }
}

fn command(fx: &Fixture, lang: Lang, entry: &str) -> Command {
    let mut cmd = match lang {
        Lang::Python => {
            let mut c = Command::new("python3");
            c.arg("-u").arg(&fx.server_py);
            c
        }
        Lang::Node => {
            let mut c = Command::new("node");
            c.arg(&fx.server_js);
            c
        }
    };
    cmd.current_dir(&fx.code)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SLESS_ENTRYPOINT", entry)
        .env("SLESS_FUNCTION", "fixture")
        .env("SLESS_NAMESPACE", "sless-00000000")
        .env("SLESS_CODE_DIR", &fx.code)
        .env("SLESS_HOST", "127.0.0.1")
        .env("SLESS_PORT", "0")
        .env("SLESS_TIMEOUT_SEC", "7")
        .env("SLESS_MEMORY_MB", "128");
    cmd
}

struct Server {
    child: Child,
    url: String,
    stderr: std::thread::JoinHandle<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Server {
    fn start(fx: &Fixture, lang: Lang, entry: &str) -> Server {
        let mut child = command(fx, lang, entry)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("SLESS_READY port=")
            .unwrap_or_else(|| panic!("{lang:?} {entry}: no READY line, got {line:?}"))
            .parse()
            .unwrap();
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
            stderr,
            stdout,
        }
    }

    /// SIGTERM, then the exit status and (stdout, stderr).
    fn stop(mut self) -> (std::process::ExitStatus, String, String) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("server ignored SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (
            status,
            self.stdout.join().unwrap(),
            self.stderr.join().unwrap(),
        )
    }
}

async fn post_json(url: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let r = reqwest::Client::new()
        .post(format!("{url}/"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.unwrap().to_vec())
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| panic!("not JSON: {:?}", String::from_utf8_lossy(bytes)))
}

async fn event_shape(lang: Lang) {
    let fx = fixture();
    let s = Server::start(&fx, lang, &format!("{}.echo", module(lang)));
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/orders/42?verbose=1&tag=a&tag=b", s.url))
        .header("content-type", "application/json")
        .header("X-Request-Id", "req-123")
        .header("X-Dup", "one")
        .header("X-Dup", "two") // reqwest appends
        .body(r#"{"any": ["JSON", 1]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: Value = r.json().await.unwrap();
    let e = &v["event"];
    assert_eq!(e["method"], "POST");
    assert_eq!(e["path"], "/orders/42");
    assert_eq!(e["query"], json!({"verbose": "1", "tag": ["a", "b"]}));
    assert_eq!(e["headers"]["content-type"], "application/json");
    assert_eq!(e["headers"]["x-dup"], "one, two");
    assert_eq!(e["body"], json!({"any": ["JSON", 1]}));
    assert_eq!(e["isBase64Encoded"], false);
    assert_eq!(
        v["context"],
        json!({"function": "fixture", "namespace": "sless-00000000", "requestId": "req-123", "timeoutSec": 7})
    );

    // Text, binary, empty, JSON without a content type, GET with no body.
    let cases: Vec<(Option<&str>, Vec<u8>, Value, bool)> = vec![
        (Some("text/plain"), b"hello".to_vec(), json!("hello"), false),
        (
            Some("text/plain"),
            b"{\"a\":1}".to_vec(),
            json!("{\"a\":1}"),
            false,
        ),
        (None, b"{\"a\":1}".to_vec(), json!({"a": 1}), false),
        (
            Some("application/json"),
            b"not json".to_vec(),
            json!("not json"),
            false,
        ),
        (
            Some("application/octet-stream"),
            vec![0xff, 0xfe, 0x00],
            json!("//4A"),
            true,
        ),
        (None, vec![], Value::Null, false),
    ];
    for (ct, body, want, b64) in cases {
        let mut req = client.put(format!("{}/", s.url)).body(body.clone());
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        assert_eq!(v["event"]["body"], want, "{lang:?} {ct:?} {body:?}");
        assert_eq!(v["event"]["isBase64Encoded"], b64);
        assert_eq!(v["event"]["method"], "PUT");
    }
    let v: Value = client
        .get(format!("{}/", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["event"]["path"], "/");
    assert_eq!(v["event"]["query"], json!({}));
    assert_eq!(v["event"]["body"], Value::Null);

    let (status, _, _) = s.stop();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
}

fn module(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "main",
        Lang::Node => "index",
    }
}

async fn responses(lang: Lang) {
    let fx = fixture();
    let m = module(lang);

    let s = Server::start(&fx, lang, &format!("{m}.text"));
    let (code, h, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 201);
    assert_eq!(h["x-custom"], "yes");
    assert_eq!(h["content-type"], "text/plain; charset=utf-8");
    assert_eq!(body, b"created");
    s.stop();

    let s = Server::start(&fx, lang, &format!("{m}.jsonbody"));
    let (code, h, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 404);
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(json_of(&body), json!({"missing": true}));
    s.stop();

    let s = Server::start(&fx, lang, &format!("{m}.binary"));
    let (code, h, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(body, [0, 1, 2, 255]);
    s.stop();

    let s = Server::start(&fx, lang, &format!("{m}.nothing"));
    let (code, h, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(json_of(&body), Value::Null);
    let (_, stdout, _) = s.stop();
    assert!(stdout.contains("printed to stdout"), "{stdout}");

    let s = Server::start(&fx, lang, &format!("{m}.one"));
    let (code, _, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(json_of(&body), json!(["one", "POST"]));
    s.stop();

    // Async handlers, 20 at once.
    let s = Server::start(&fx, lang, &format!("{m}.slow"));
    let started = std::time::Instant::now();
    let empty = json!({});
    let calls = (0..20).map(|_| post_json(&s.url, &empty));
    for (code, _, body) in futures_util::future::join_all(calls).await {
        assert_eq!(code, 200);
        assert_eq!(json_of(&body)["async"], true);
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    s.stop();

    // An exception is a 500 with the message and type; the trace goes to stderr.
    let s = Server::start(&fx, lang, &format!("{m}.boom"));
    let (code, h, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 500);
    assert_eq!(h["content-type"], "application/json");
    let want_type = if lang == Lang::Python {
        "ValueError"
    } else {
        "RangeError"
    };
    assert_eq!(json_of(&body), json!({"error": "kaput", "type": want_type}));
    // The server keeps serving after an exception.
    assert_eq!(post_json(&s.url, &json!({})).await.0, 500);
    let (status, _, stderr) = s.stop();
    assert!(status.success());
    assert!(
        stderr.contains("kaput") && stderr.contains(want_type),
        "{stderr}"
    );
}

fn load_failure(fx: &Fixture, lang: Lang, entry: &str) -> String {
    let out = command(fx, lang, entry)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{lang:?} {entry}: {out:?}");
    assert!(out.stdout.is_empty(), "no READY line for {entry}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains(entry), "{entry}: {stderr}");
    stderr
}

async fn wrong_entrypoints(lang: Lang) {
    let fx = fixture();
    let m = module(lang);
    load_failure(&fx, lang, "nosuchmodule.handler");
    load_failure(&fx, lang, &format!("{m}.missing"));
    let e = load_failure(&fx, lang, &format!("{m}.not_callable"));
    assert!(e.contains("not a function"), "{e}");
    load_failure(&fx, lang, "nodot");
}

async fn once_mode(lang: Lang) {
    let fx = fixture();
    let m = module(lang);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    let output = dir.path().join("out.json");
    std::fs::write(&input, r#"{"job": 7}"#).unwrap();
    let run = |entry: &str| {
        command(&fx, lang, entry)
            .arg("--once")
            .arg(&input)
            .arg(&output)
            .output()
            .unwrap()
    };
    let out = run(&format!("{m}.echo"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = json_of(&std::fs::read(&output).unwrap());
    assert_eq!(v["ok"], true);
    assert_eq!(v["result"]["event"], json!({"job": 7}));
    assert_eq!(v["result"]["context"]["function"], "fixture");

    let out = run(&format!("{m}.slow"));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        json_of(&std::fs::read(&output).unwrap())["result"]["async"],
        true
    );

    let out = run(&format!("{m}.boom"));
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&std::fs::read(&output).unwrap());
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"], "kaput");
    assert!(String::from_utf8_lossy(&out.stderr).contains("kaput"));

    let out = run(&format!("{m}.missing"));
    assert_eq!(out.status.code(), Some(3));
}

#[tokio::test]
async fn python_event_shape() {
    event_shape(Lang::Python).await;
}

#[tokio::test]
async fn node_event_shape() {
    event_shape(Lang::Node).await;
}

#[tokio::test]
async fn python_responses() {
    responses(Lang::Python).await;
}

#[tokio::test]
async fn node_responses() {
    responses(Lang::Node).await;
}

#[tokio::test]
async fn python_wrong_entrypoints_exit_3() {
    wrong_entrypoints(Lang::Python).await;
}

#[tokio::test]
async fn node_wrong_entrypoints_exit_3() {
    wrong_entrypoints(Lang::Node).await;
}

#[tokio::test]
async fn python_once_mode() {
    once_mode(Lang::Python).await;
}

#[tokio::test]
async fn node_once_mode() {
    once_mode(Lang::Node).await;
}

#[tokio::test]
async fn python_dotted_module_path() {
    let fx = fixture();
    let s = Server::start(&fx, Lang::Python, "pkg.deep.handler");
    let (code, _, body) = post_json(&s.url, &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(json_of(&body), json!("deep"));
    s.stop();
}

#[tokio::test]
async fn node_module_kinds() {
    let fx = fixture();
    for (entry, want) in [
        ("mod.handler", json!({"esm": "mjs", "method": "POST"})),
        ("esm/app.handler", json!({"esm": "type-module"})),
        ("esm/tla.handler", json!("top-level await")),
        ("legacy.handler", json!("cjs")),
    ] {
        let s = Server::start(&fx, Lang::Node, entry);
        let (code, _, body) = post_json(&s.url, &json!({})).await;
        assert_eq!(code, 200, "{entry}");
        assert_eq!(json_of(&body), want, "{entry}");
        s.stop();
    }
}

#[test]
fn embedded_servers_are_the_repository_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtimes");
    assert_eq!(
        std::fs::read_to_string(root.join("server.py")).unwrap(),
        sless_operator::runtimes::SERVER_PY
    );
    assert_eq!(
        std::fs::read_to_string(root.join("server.js")).unwrap(),
        sless_operator::runtimes::SERVER_JS
    );
}

/// Sends `raw` on a fresh connection to `url` and reads until the server
/// closes it (or 5 s pass): the whole answer text.
fn raw_exchange(url: &str, raw: &[u8]) -> String {
    use std::io::Write;
    let addr = url.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The Python server reads request heads itself (not with the email
/// package): what http.server checked it still checks, keep-alive and
/// folded headers included.
#[tokio::test]
async fn python_request_heads() {
    let fx = fixture();
    let s = Server::start(&fx, Lang::Python, "main.echo");
    // Two keep-alive requests on one connection, the second closing it; a
    // folded header is joined with a space, names are matched in any case.
    let two = raw_exchange(
        &s.url,
        b"GET /one HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n  b\r\nx-request-id: r-1\r\n\r\n\
          GET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(two.matches("HTTP/1.1 200 OK").count(), 2, "{two}");
    assert!(two.contains(r#""x-fold": "a b""#), "{two}");
    assert!(two.contains(r#""requestId": "r-1""#), "{two}");
    assert!(two.contains(r#""path": "/two""#), "{two}");
    // Limits and malformed request lines get http.server's answers.
    let many: Vec<u8> = (0..101)
        .flat_map(|i| format!("X-{i}: y\r\n").into_bytes())
        .collect();
    let cases: [(Vec<u8>, &str); 5] = [
        (
            [b"GET / HTTP/1.1\r\n".as_slice(), &many, b"\r\n"].concat(),
            "431",
        ),
        (
            [
                b"GET / HTTP/1.1\r\nX-Long: ".as_slice(),
                &vec![b'a'; 70_000],
                b"\r\n\r\n",
            ]
            .concat(),
            "431",
        ),
        (b"GET / HTTP/2.0\r\n\r\n".to_vec(), "505"),
        (b"GET / FOO/1.1\r\n\r\n".to_vec(), "400"),
        (b"POST /\r\n\r\n".to_vec(), "400"),
    ];
    for (raw, code) in cases {
        let answer = raw_exchange(&s.url, &raw);
        assert!(
            answer.contains(&format!("Error code: {code}"))
                || answer.starts_with(&format!("HTTP/1.1 {code}")),
            "{:?}…: want {code}, got {answer:.200}",
            String::from_utf8_lossy(&raw[..raw.len().min(24)])
        );
    }
    // A client that says Expect: 100-continue gets it, then the answer.
    let cont = raw_exchange(
        &s.url,
        b"POST /e HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n{}",
    );
    assert!(cont.starts_with("HTTP/1.1 100 Continue"), "{cont}");
    assert!(cont.contains("HTTP/1.1 200 OK"), "{cont}");
    s.stop();
}
