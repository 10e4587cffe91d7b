//! A scripted Kubernetes API server for reconcile and REST tests (the
//! tower-test `ApiServerVerifier` pattern): each expected request is matched
//! in order on method and path+query, its JSON body can be checked, and it is
//! answered with a given status and body. Event writes
//! (`events.k8s.io`) are answered and recorded on the side. A request out of
//! order or beyond the script is recorded as an error and answered 500, so an
//! extra call fails the test and a missing one is left in `remaining`.

#![allow(dead_code)]

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::time::Duration;

/// A check run on a request's JSON body.
pub type Check = Box<dyn Fn(&Value) + Send>;

/// One expected request and its answer.
pub struct Step {
    /// Expected method.
    pub method: Method,
    /// Expected path and query, exactly.
    pub uri: String,
    /// Answer status.
    pub status: u16,
    /// Answer body; `None` echoes the request body.
    pub answer: Option<Value>,
    /// Checks on the request body.
    pub check: Option<Check>,
    /// A plain-text answer (pod logs) instead of JSON.
    pub text: Option<String>,
}

impl Step {
    /// Expects `method uri`, answers 200 echoing the body.
    pub fn new(method: Method, uri: impl Into<String>) -> Step {
        Step {
            method,
            uri: uri.into(),
            status: 200,
            answer: None,
            check: None,
            text: None,
        }
    }
    /// Answers 200 with a plain-text body (what the log endpoint returns).
    pub fn text(mut self, text: impl Into<String>) -> Step {
        self.status = 200;
        self.text = Some(text.into());
        self
    }
    /// Answers with this status and body.
    pub fn answer(mut self, status: u16, body: Value) -> Step {
        self.status = status;
        self.answer = Some(body);
        self
    }
    /// Answers with this status, echoing the request body.
    pub fn status(mut self, status: u16) -> Step {
        self.status = status;
        self
    }
    /// Runs `check` on the request body.
    pub fn check(mut self, check: impl Fn(&Value) + Send + 'static) -> Step {
        self.check = Some(Box::new(check));
        self
    }
}

/// What the mock saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Requests that did not match the script.
    pub errors: Vec<String>,
    /// Expected requests never made (`METHOD uri`).
    pub remaining: Vec<String>,
    /// Bodies of published events.
    pub events: Vec<Value>,
    /// Every non-event request, `METHOD uri`.
    pub seen: Vec<String>,
}

impl Outcome {
    /// Panics unless every expected request and nothing else was made.
    pub fn assert_complete(&self) {
        assert!(
            self.errors.is_empty() && self.remaining.is_empty(),
            "mock API server: unexpected {:#?}\nnever made {:#?}\nseen {:#?}",
            self.errors,
            self.remaining,
            self.seen
        );
    }

    /// Reasons of the events published, in order.
    pub fn event_reasons(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// A Kubernetes `Status` error body.
pub fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    })
}

fn response(status: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
        .unwrap()
}

/// A client wired to a scripted server; await the handle (after dropping
/// every clone of the client) for the [`Outcome`].
pub fn start(steps: Vec<Step>) -> (Client, tokio::task::JoinHandle<Outcome>) {
    let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(svc, "default");
    let task = tokio::spawn(async move {
        let mut steps: VecDeque<Step> = steps.into();
        let mut out = Outcome::default();
        while let Some((req, send)) = handle.next_request().await {
            let method = req.method().clone();
            let uri = req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if uri.starts_with("/apis/events.k8s.io/") {
                out.events.push(body.clone());
                send.send_response(response(201, &body));
                continue;
            }
            out.seen.push(format!("{method} {uri}"));
            match steps.pop_front() {
                Some(step) if step.method == method && step.uri == uri => {
                    if let Some(check) = &step.check {
                        check(&body);
                    }
                    match step.text {
                        Some(text) => send.send_response(
                            Response::builder()
                                .status(step.status)
                                .header("content-type", "text/plain")
                                .body(Body::from(text.into_bytes()))
                                .unwrap(),
                        ),
                        None => {
                            let answer = step.answer.unwrap_or(body);
                            send.send_response(response(step.status, &answer));
                        }
                    }
                }
                Some(step) => {
                    out.errors.push(format!(
                        "got {method} {uri}, expected {} {}",
                        step.method, step.uri
                    ));
                    steps.push_front(step);
                    send.send_response(response(
                        500,
                        &status_body(500, "InternalError", "unexpected"),
                    ));
                }
                None => {
                    out.errors
                        .push(format!("got {method} {uri} after the script ended"));
                    send.send_response(response(
                        500,
                        &status_body(500, "InternalError", "unexpected"),
                    ));
                }
            }
        }
        out.remaining = steps
            .into_iter()
            .map(|s| format!("{} {}", s.method, s.uri))
            .collect();
        out
    });
    (client, task)
}

/// Waits for the mock's outcome (the client must be dropped first).
pub async fn finish(task: tokio::task::JoinHandle<Outcome>) -> Outcome {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("mock API server did not finish: a client clone is still alive")
        .expect("mock API server task panicked (a body check failed)")
}
