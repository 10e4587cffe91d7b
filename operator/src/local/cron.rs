//! The cron scheduler of one trigger: computes the next run time from the
//! schedule (croner, seconds allowed), keeps `status.next_run_at`, and at each
//! tick POSTs the payload to the function through the invoke proxy, with the
//! function's timeout (each run is recorded in the invocation log as source
//! `cron`). Never two runs of one trigger at once: a tick while a run is still
//! going is skipped, counted in `status.skipped` and logged. A function that
//! is missing or not Ready is not called; the tick is logged and the next one
//! tries again.

use super::{Inner, Key, LocalBackend};
use crate::api::proxy::{ProxyRequest, Record, forward};
use crate::backend::{Backend, InvokeTarget};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use chrono::{DateTime, SecondsFormat, Utc};
use sless_wire::trigger::{TriggerRun, TriggerSpec};
use sless_wire::{ErrorBody, ErrorCode, InvocationSource};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Header that tells the function which trigger called it.
pub const TRIGGER_HEADER: &str = "x-sless-trigger";

/// Longest answer excerpt kept in `last_run.message`.
const EXCERPT_CHARS: usize = 200;
/// Most of an answer body read back from a cron run.
const ANSWER_MAX_BYTES: usize = 64 * 1024;

static RUN_IDS: AtomicU64 = AtomicU64::new(1);

struct Running {
    id: u64,
    since: String,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Whether a run of one trigger is going; outlives scheduler restarts.
#[derive(Default)]
pub struct RunState {
    cur: Mutex<Option<Running>>,
}

impl RunState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.cur.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks run `id` as started; `Err(since)` when another run is going.
    fn try_begin(&self, id: u64, since: &str) -> Result<(), String> {
        let mut cur = self.lock();
        if let Some(r) = cur.as_ref() {
            return Err(r.since.clone());
        }
        *cur = Some(Running {
            id,
            since: since.to_string(),
            task: None,
        });
        Ok(())
    }

    fn running_since(&self) -> Option<String> {
        self.lock().as_ref().map(|r| r.since.clone())
    }

    fn attach(&self, id: u64, task: tokio::task::JoinHandle<()>) {
        let mut cur = self.lock();
        if let Some(r) = cur.as_mut().filter(|r| r.id == id) {
            r.task = Some(task);
        }
    }

    fn finish(&self, id: u64) {
        let mut cur = self.lock();
        if cur.as_ref().is_some_and(|r| r.id == id) {
            *cur = None;
        }
    }

    /// Stops a run still going and waits for it.
    pub async fn cancel(&self) {
        let task = self.lock().take().and_then(|r| r.task);
        if let Some(t) = task {
            t.abort();
            let _ = t.await;
        }
    }
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The scheduler loop of one enabled cron trigger; runs until aborted.
pub(super) async fn schedule(inner: Arc<Inner>, key: Key, spec: TriggerSpec, run: Arc<RunState>) {
    let triggers = &inner.triggers;
    let schedule = spec.schedule.clone().unwrap_or_default();
    let cron = match sless_wire::validate::cron_schedule("schedule", &schedule) {
        Ok(c) => c,
        Err(e) => {
            triggers.log(&key, &format!("not scheduled: {}", e.message));
            return;
        }
    };
    let save = |f: &dyn Fn(&mut sless_wire::trigger::TriggerStatus)| triggers.save_status(&key, f);
    let mut after = Utc::now();
    let mut last_wait: Option<String> = None;
    loop {
        let next = match cron.find_next_occurrence(&after, false) {
            Ok(n) => n,
            Err(e) => {
                triggers.log(
                    &key,
                    &format!("schedule {schedule:?} has no next run time: {e}"),
                );
                save(&|s| s.next_run_at = None);
                return;
            }
        };
        let next_text = next.to_rfc3339_opts(SecondsFormat::Secs, true);
        save(&|s| s.next_run_at = Some(next_text.clone()));
        let wait = (next - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        tokio::time::sleep(wait).await;
        after = next.max(Utc::now());

        let skip = |since: String| {
            save(&|s| s.skipped += 1);
            triggers.log(
                &key,
                &format!("skipped: previous run still running since {since} (tick {next_text})"),
            );
        };
        if let Some(since) = run.running_since() {
            skip(since);
            continue;
        }
        // Resolve the target before taking the run slot: an abort (update,
        // delete) during this await must not leave the slot taken.
        let backend = LocalBackend {
            inner: inner.clone(),
        };
        let target = match backend.invoke_target(&key.0, &spec.function).await {
            Ok(t) => t,
            Err(e) => {
                let why = e.to_string();
                if last_wait.as_deref() != Some(why.as_str()) {
                    triggers.log(
                        &key,
                        &format!("not run at {next_text}: {why}; retrying at the next tick"),
                    );
                    last_wait = Some(why);
                }
                continue;
            }
        };
        if last_wait.take().is_some() {
            triggers.log(
                &key,
                &format!("function {:?} is Ready: running again", spec.function),
            );
        }
        let id = RUN_IDS.fetch_add(1, Ordering::Relaxed);
        if let Err(since) = run.try_begin(id, &stamp(Utc::now())) {
            skip(since);
            continue;
        }
        save(&|s| s.runs += 1);
        let task = tokio::spawn(run_once(
            inner.clone(),
            key.clone(),
            spec.clone(),
            target,
            run.clone(),
            id,
        ));
        run.attach(id, task);
    }
}

/// One run: POST the payload, record the outcome, free the run slot.
async fn run_once(
    inner: Arc<Inner>,
    key: Key,
    spec: TriggerSpec,
    target: InvokeTarget,
    run: Arc<RunState>,
    id: u64,
) {
    let triggers = &inner.triggers;
    let started_at = Utc::now();
    let clock = Instant::now();
    triggers.log(&key, &format!("run started (function {:?})", spec.function));
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(v) = HeaderValue::from_str(&key.1) {
        headers.insert(TRIGGER_HEADER, v);
    }
    let body = match &spec.payload {
        Some(p) => Body::from(p.clone()),
        None => Body::empty(),
    };
    let resp = forward(
        &triggers.client,
        &target,
        ProxyRequest {
            method: Method::POST,
            path: "/".into(),
            query: None,
            headers,
            body,
            client_addr: None,
            // The payload is the trigger's own, already bounded by validation.
            body_limit: None,
            record: Record::installed(&key.0, &spec.function, InvocationSource::Cron, Some(&key.1)),
        },
    )
    .await;
    let status = resp.status();
    let answer = axum::body::to_bytes(resp.into_body(), ANSWER_MAX_BYTES).await;
    let (status_code, message) = match &answer {
        Ok(bytes) => match serde_json::from_slice::<ErrorBody>(bytes) {
            Ok(err)
                if matches!(
                    err.error.code,
                    ErrorCode::UpstreamTimeout | ErrorCode::UpstreamFailed
                ) =>
            {
                (None, Some(err.error.message))
            }
            _ => {
                let text = String::from_utf8_lossy(bytes);
                let excerpt: String = text.chars().take(EXCERPT_CHARS).collect();
                (
                    Some(status.as_u16()),
                    (!excerpt.is_empty()).then_some(excerpt),
                )
            }
        },
        Err(e) => (
            Some(status.as_u16()),
            Some(format!("the answer could not be read in full: {e}")),
        ),
    };
    let ok = status_code.is_some_and(|c| (200..300).contains(&c)) && answer.is_ok();
    let completed_at = Utc::now();
    let record = TriggerRun {
        started_at: stamp(started_at),
        completed_at: stamp(completed_at),
        status_code,
        ok,
        message: message.clone(),
    };
    triggers.save_status(&key, |s| s.last_run = Some(record));
    triggers.log(
        &key,
        &format!(
            "run {} after {} ms: {}{}",
            if ok { "succeeded" } else { "failed" },
            clock.elapsed().as_millis(),
            status_code
                .map(|c| format!("status {c}"))
                .unwrap_or_else(|| "no answer".into()),
            message.map(|m| format!(": {m}")).unwrap_or_default()
        ),
    );
    run.finish(id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_run_cannot_begin_until_the_first_finishes() {
        let run = RunState::default();
        run.try_begin(1, "t1").unwrap();
        assert_eq!(run.try_begin(2, "t2").unwrap_err(), "t1");
        run.finish(2); // not the running one: no effect
        assert!(run.try_begin(3, "t3").is_err());
        run.finish(1);
        run.try_begin(4, "t4").unwrap();
        let task = tokio::spawn(std::future::pending::<()>());
        run.attach(4, task);
        run.cancel().await;
        run.try_begin(5, "t5").unwrap();
    }
}
