//! A create whose answer is lost (gated on `TF_ACC=1`): the operator stores
//! the object, then the connection breaks before its answer reaches the
//! provider, as when the operator is killed at that moment (the SIGKILL test
//! in faults.rs hits this window only by chance). A proxy in front of the real
//! operator makes it happen every time: it forwards the first create of each
//! kind, waits for the operator's answer, and closes the connection instead of
//! relaying it. The apply must fail with a clear error, Terraform must track
//! each such object as tainted, and the next apply must replace it, so the
//! configuration converges instead of finding the name taken forever.
//!
//! The same proxy also fails the first adoption of what an interrupted apply
//! left (it answers the PATCH with a 500 of its own): the apply must say so
//! and lose nothing, and the next apply must adopt it. And it cuts a
//! function create's success body in half: the same "answer was lost" path.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use sless_wire::paths;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

fn config() -> String {
    format!(
        r#"{header}
resource "sless_function" "f" {{
  name       = "lost-f"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
}}

resource "sless_trigger" "t" {{
  name     = "lost-t"
  function = sless_function.f.name
  type     = "http"
}}

resource "sless_job" "j" {{
  name       = "lost-j"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/job"
  input      = jsonencode({{ n = 21 }})
}}

resource "sless_service" "s" {{
  name       = "lost-s"
  runtime    = "python3.11"
  entrypoint = "app.py"
  source_dir = "${{path.module}}/app"
}}

output "url" {{
  value = sless_trigger.t.url
}}

output "job_message" {{
  value = sless_job.j.message
}}
"#,
        header = tf_header()
    )
}

/// The fault the proxy injects, once per path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Forward the first create of each kind (a POST to its collection),
    /// then close the connection instead of relaying the answer.
    LoseCreates,
    /// Answer the first PATCH of each object with a 500 of the proxy's own,
    /// without forwarding it.
    RefusePatches,
    /// Forward the first create of a function, then relay its answer's head
    /// and half its body and close the connection (a cut success body).
    CutFunctionCreates,
}

/// What the proxy injects, and the paths it did it for.
struct Losses {
    fault: Fault,
    cut: Mutex<BTreeSet<String>>,
}

impl Losses {
    fn new(fault: Fault) -> Losses {
        Losses {
            fault,
            cut: Mutex::default(),
        }
    }

    /// True (once per path) for a request of `fault`'s kind.
    fn hits(&self, fault: Fault, method: &hyper::Method, path: &str) -> bool {
        let matches = match fault {
            Fault::LoseCreates => {
                method == hyper::Method::POST
                    && ["/functions", "/triggers", "/jobs", "/services"]
                        .iter()
                        .any(|kind| path.ends_with(kind))
            }
            Fault::RefusePatches => method == hyper::Method::PATCH,
            Fault::CutFunctionCreates => {
                method == hyper::Method::POST && path.ends_with("/functions")
            }
        };
        self.fault == fault && matches && self.cut.lock().unwrap().insert(path.to_string())
    }

    fn cut(&self) -> Vec<String> {
        self.cut.lock().unwrap().iter().cloned().collect()
    }
}

/// A body that yields its bytes, waits (hyper flushes the head and those
/// bytes meanwhile), then fails: hyper closes the connection short of the
/// `Content-Length` it announced.
struct CutBody {
    bytes: Option<Bytes>,
    pause: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl CutBody {
    fn new(bytes: Bytes) -> CutBody {
        CutBody {
            bytes: Some(bytes),
            pause: Box::pin(tokio::time::sleep(std::time::Duration::from_millis(200))),
        }
    }
}

impl hyper::body::Body for CutBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        use std::task::Poll;
        if let Some(bytes) = self.bytes.take() {
            return Poll::Ready(Some(Ok(hyper::body::Frame::data(bytes))));
        }
        match self.pause.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => Poll::Ready(Some(Err(std::io::Error::other("cut on purpose")))),
        }
    }
}

/// What the proxy answers with: the operator's body, or a cut one.
type ProxyBody = Either<Full<Bytes>, CutBody>;

/// Starts the proxy in front of `upstream` (the operator's base URL) and
/// returns its base URL.
async fn lossy_proxy(upstream: String, losses: Arc<Losses>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let http = reqwest::Client::new();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (http, upstream, losses) = (http.clone(), upstream.clone(), losses.clone());
            tokio::spawn(async move {
                let lost = Arc::new(tokio::sync::Notify::new());
                let on_loss = lost.clone();
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (http, upstream, losses, lost) =
                        (http.clone(), upstream.clone(), losses.clone(), lost.clone());
                    async move { forward(req, &http, &upstream, &losses, &lost).await }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc);
                // Dropping the connection closes the socket: the answer is lost.
                tokio::select! {
                    _ = conn => {}
                    _ = on_loss.notified() => {}
                }
            });
        }
    });
    url
}

async fn forward(
    req: Request<Incoming>,
    http: &reqwest::Client,
    upstream: &str,
    losses: &Losses,
    lost: &tokio::sync::Notify,
) -> Result<Response<ProxyBody>, hyper::Error> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if losses.hits(Fault::RefusePatches, &method, &path) {
        let body = r#"{"error":{"code":"internal","message":"injected: the database is locked"}}"#;
        return Ok(Response::builder()
            .status(500)
            .header("content-type", "application/json")
            .body(Either::Left(Full::new(Bytes::from_static(body.as_bytes()))))
            .unwrap());
    }
    let target = match req.uri().query() {
        Some(q) => format!("{upstream}{path}?{q}"),
        None => format!("{upstream}{path}"),
    };
    let headers = req.headers().clone();
    let body = req.into_body().collect().await?.to_bytes();
    let mut rb = http.request(method.clone(), target).body(body);
    for (k, v) in &headers {
        if !matches!(k.as_str(), "host" | "content-length" | "connection") {
            rb = rb.header(k, v);
        }
    }
    let answer = rb.send().await.expect("the operator answers the proxy");
    if losses.hits(Fault::LoseCreates, &method, &path) {
        // The operator has answered (it stored the object): lose it.
        lost.notify_one();
        std::future::pending::<()>().await;
    }
    let mut resp = Response::builder().status(answer.status());
    for (k, v) in answer.headers() {
        if !matches!(
            k.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            resp = resp.header(k, v);
        }
    }
    let bytes = answer.bytes().await.expect("the operator's answer body");
    if losses.hits(Fault::CutFunctionCreates, &method, &path) {
        // The operator stored the function; the provider gets half of its
        // answer.
        let half = bytes.slice(..bytes.len() / 2);
        let resp = resp.header("content-length", bytes.len());
        return Ok(resp.body(Either::Right(CutBody::new(half))).unwrap());
    }
    Ok(resp.body(Either::Left(Full::new(bytes))).unwrap())
}

/// Addresses Terraform tracks as tainted, from `terraform show -json`.
fn tainted(tf: &Tf) -> Vec<String> {
    let show: Value = serde_json::from_str(&tf.ok(&["show", "-json"])).expect("show -json");
    let mut out: Vec<String> = show["values"]["root_module"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|r| r["tainted"] == true)
        .filter_map(|r| r["address"].as_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_is_lost_is_tainted_and_replaced() {
    if skip() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let sub = "lost@example.com";
    let ns = sless_wire::namespace_for_sub(sub);
    let token = op.token(sub);
    let losses = Arc::new(Losses::new(Fault::LoseCreates));
    let proxy = lossy_proxy(op.base_url.clone(), losses.clone()).await;
    let tf = Tf::new(root.path(), &proxy, &token);
    write(
        &tf.dir.join("fn/main.py"),
        b"def handler(event, context):\n    return {\"hello\": \"lost\"}\n",
    );
    write(
        &tf.dir.join("job/main.py"),
        b"def handler(event, context):\n    return {\"double\": event[\"n\"] * 2}\n",
    );
    write(&tf.dir.join("app/app.py"), SERVICE_APP_PY.as_bytes());
    tf.write_main(&config());

    // 1. The creates of the function, the job and the service lose their
    //    answers (the trigger waits for the function): the apply fails with
    //    a clear error, and Terraform tracks the three as tainted.
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = flat(&text(&out));
    assert!(!out.status.success(), "apply 1 must fail:\n{said}");
    for kind in ["function lost-f", "job lost-j", "service lost-s"] {
        assert!(
            said.contains(&format!("Cannot create {kind}: the answer was lost")),
            "apply 1 must say the answer of {kind} was lost:\n{said}"
        );
    }
    assert!(
        said.contains("records it as tainted"),
        "the error says what happens next:\n{said}"
    );
    assert!(!said.contains("panicked"), "{said}");
    assert_eq!(
        tainted(&tf),
        ["sless_function.f", "sless_job.j", "sless_service.s"]
    );
    // The operator did store them.
    assert_eq!(
        object_names(&op, &token, &paths::functions(&ns)).await,
        ["lost-f"]
    );
    assert_eq!(
        object_names(&op, &token, &paths::jobs(&ns)).await,
        ["lost-j"]
    );
    assert_eq!(
        object_names(&op, &token, &paths::services(&ns)).await,
        ["lost-s"]
    );

    // 2. The next apply replaces the three (no "already exists"), then the
    //    trigger's create loses its answer in turn.
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = flat(&text(&out));
    assert!(!out.status.success(), "apply 2 must fail:\n{said}");
    assert!(!said.contains("already exists"), "{said}");
    for addr in ["sless_function.f", "sless_job.j", "sless_service.s"] {
        assert!(
            said.contains(&format!("# {addr} is tainted, so must be replaced")),
            "apply 2 must replace {addr}:\n{said}"
        );
    }
    assert!(
        said.contains("Cannot create trigger lost-t: the answer was lost"),
        "{said}"
    );
    assert_eq!(tainted(&tf), ["sless_trigger.t"]);

    // 3. The third apply converges: a clean plan, each object once, the
    //    trigger answering with the function and the job's result in state.
    tf.apply();
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after converging must be clean:\n{plan}");
    assert!(tainted(&tf).is_empty());
    for (path, name) in [
        (paths::functions(&ns), "lost-f"),
        (paths::triggers(&ns), "lost-t"),
        (paths::jobs(&ns), "lost-j"),
        (paths::services(&ns), "lost-s"),
    ] {
        assert_eq!(object_names(&op, &token, &path).await, [name], "{path}");
    }
    let outputs = tf.outputs();
    let url = outputs["url"]["value"].as_str().unwrap();
    let r = reqwest::get(url).await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["hello"], "lost", "{url}: {body}");
    let message: Value =
        serde_json::from_str(outputs["job_message"]["value"].as_str().unwrap()).unwrap();
    assert_eq!(message["double"], 42);
    assert_eq!(
        losses.cut(),
        [
            paths::functions(&ns),
            paths::jobs(&ns),
            paths::services(&ns),
            paths::triggers(&ns),
        ]
    );

    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    for path in [
        paths::functions(&ns),
        paths::triggers(&ns),
        paths::jobs(&ns),
        paths::services(&ns),
    ] {
        assert!(object_names(&op, &token, &path).await.is_empty(), "{path}");
    }
}

/// An operator, the proxy in front of it injecting `fault`, and a Terraform
/// directory with one Python function `name` (answering `{"hello": name}`)
/// whose resource block gets `extra` lines.
struct Scene {
    _root: tempfile::TempDir,
    op: Operator,
    ns: String,
    token: String,
    losses: Arc<Losses>,
    tf: Tf,
}

async fn one_function_behind(fault: Fault, sub: &str, name: &str, extra: &str) -> Scene {
    let root = tempfile::tempdir().unwrap();
    let op = Operator::start(&root.path().join("operator"));
    let ns = sless_wire::namespace_for_sub(sub);
    let token = op.token(sub);
    let losses = Arc::new(Losses::new(fault));
    let proxy = lossy_proxy(op.base_url.clone(), losses.clone()).await;
    let tf = Tf::new(root.path(), &proxy, &token);
    write(
        &tf.dir.join("fn/main.py"),
        format!("def handler(event, context):\n    return {{\"hello\": {name:?}}}\n").as_bytes(),
    );
    tf.write_main(&format!(
        r#"{header}
resource "sless_function" "f" {{
  name       = "{name}"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${{path.module}}/fn"
{extra}}}
"#,
        header = tf_header()
    ));
    Scene {
        _root: root,
        op,
        ns,
        token,
        losses,
        tf,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_adoption_loses_nothing_and_the_next_apply_adopts() {
    if skip() {
        return;
    }
    let Scene {
        op,
        ns,
        token,
        losses,
        tf,
        _root,
    } = one_function_behind(
        Fault::RefusePatches,
        "adopt@example.com",
        "adopt-f",
        "  memory_mb  = 128\n",
    )
    .await;
    // What an apply interrupted after the operator stored its create leaves:
    // the function without code, here with another memory limit.
    let (status, left) = api_json(
        &op,
        &token,
        reqwest::Method::POST,
        &paths::functions(&ns),
        Some(serde_json::json!({
            "name": "adopt-f",
            "runtime": "python3.11",
            "entrypoint": "main.handler",
            "memory_mb": 256,
        })),
    )
    .await;
    assert_eq!(status, 201, "{left}");

    // 1. The adoption's PATCH fails: the apply says so with the operator's
    //    message, nothing is in state, and the leftover is still there,
    //    unchanged.
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = flat(&text(&out));
    assert!(!out.status.success(), "apply 1 must fail:\n{said}");
    assert!(said.contains("Cannot adopt function adopt-f"), "{said}");
    assert!(said.contains("injected: the database is locked"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    assert_eq!(losses.cut(), [paths::function(&ns, "adopt-f")]);
    let state = tf.ok(&["state", "list"]);
    assert!(state.trim().is_empty(), "nothing in state: {state}");
    let (_, f) = api_json(
        &op,
        &token,
        reqwest::Method::GET,
        &paths::function(&ns, "adopt-f"),
        None,
    )
    .await;
    assert_eq!(
        f["spec"]["memory_mb"], 256,
        "the leftover is unchanged: {f}"
    );

    // 2. The next apply (the proxy refuses each PATCH once) adopts it, gives
    //    it this configuration and its code: it answers, and the plan is
    //    clean.
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = flat(&text(&out));
    assert!(out.status.success(), "apply 2 must adopt:\n{said}");
    assert!(
        said.contains("Adopted function adopt-f left by an interrupted apply"),
        "{said}"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "after adopting, the plan is clean:\n{plan}");
    let (_, r) = api_json(
        &op,
        &token,
        reqwest::Method::POST,
        &paths::function_invoke(&ns, "adopt-f"),
        Some(serde_json::json!({})),
    )
    .await;
    assert_eq!(r["hello"], "adopt-f", "{r}");
    assert_eq!(
        object_names(&op, &token, &paths::functions(&ns)).await,
        ["adopt-f"]
    );
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    assert!(
        object_names(&op, &token, &paths::functions(&ns))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_is_cut_is_tainted_and_replaced() {
    if skip() {
        return;
    }
    let Scene {
        op,
        ns,
        token,
        losses,
        tf,
        _root,
    } = one_function_behind(Fault::CutFunctionCreates, "cut@example.com", "cut-f", "").await;

    // 1. The create's answer arrives with half its body: the apply fails
    //    with "the answer was lost" and the function is tainted.
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = flat(&text(&out));
    assert!(!out.status.success(), "apply 1 must fail:\n{said}");
    assert!(
        said.contains("Cannot create function cut-f: the answer was lost"),
        "{said}"
    );
    assert!(!said.contains("panicked"), "{said}");
    assert_eq!(losses.cut(), [paths::functions(&ns)]);
    assert_eq!(tainted(&tf), ["sless_function.f"]);
    assert_eq!(
        object_names(&op, &token, &paths::functions(&ns)).await,
        ["cut-f"]
    );

    // 2. The next apply replaces it and converges.
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let said = flat(&text(&out));
    assert!(out.status.success(), "apply 2 must converge:\n{said}");
    assert!(
        said.contains("# sless_function.f is tainted, so must be replaced"),
        "{said}"
    );
    let (code, plan) = tf.plan_code();
    assert_eq!(code, 0, "plan after converging must be clean:\n{plan}");
    assert_eq!(
        object_names(&op, &token, &paths::functions(&ns)).await,
        ["cut-f"]
    );
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
}
