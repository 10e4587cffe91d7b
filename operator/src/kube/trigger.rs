//! The Trigger controller. `http`: a Service selecting the function's pods
//! and an Ingress on the configured host under `/<ns>/<trigger>`, with
//! `status.url`. `cron`: a CronJob beside the function calling it with a
//! pinned curl, never two runs at once. Children are made only while the
//! target function is Ready; until then the trigger is `Waiting` and
//! requeued every 15 s. Disabled http triggers lose their children (the URL
//! answers 404); disabled cron triggers are suspended. Children carry owner
//! labels (they live in `sless-fn-<ns>`) and are deleted by the finalizer.
//! A CronJob runs at minute resolution: a six-field schedule whose seconds
//! field is `0` is applied as its five fields; other seconds are refused by
//! the REST API, and a resource that has one anyway gets no CronJob and a
//! status message saying why.
//!
//! Cron runs are recorded in the status from the Jobs the CronJob spawns
//! (they carry the owner labels and are watched, so a finished run updates
//! the status at once): `runs` counts each Job once (a watermark of the
//! newest counted Job is kept in `status.counted`), `lastRun` is the newest
//! finished Job, and `nextRunAt` is computed from the schedule in UTC
//! ([`observe_runs`], [`next_run_at`]). Kubernetes does not report ticks
//! skipped by `concurrencyPolicy: Forbid`, so nothing counts them.
//!
//! Scale to zero: an http trigger of a function with `min_instances = 0`
//! is routed through the operator (an Ingress in the operator's namespace
//! to its Service, whose proxy wakes the function); with `min_instances = 1`
//! straight to the function's pods as above. The route follows a change of
//! `min_instances` at the next reconcile (at most [`REQUEUE_ACTIVE`]). A
//! cron trigger's CronJob always calls the function's Service; for a
//! function that scales to zero the controller wakes it ahead of each run
//! ([`scale::cron_warm`]).

use super::KubeError;
use super::builders::{self, HttpRoute};
use super::controller_util::{
    Controlled, Reconciled, delete_if_present, patch_status, reconcile_with_finalizer,
    status_changed,
};
use super::crd::{CountedRun, Function, Trigger, TriggerRunStatus, TriggerStatus};
use super::function::{Ctx, job_outcome, set_condition};
use super::names::{self, FIELD_MANAGER, OwnerKind};
use super::scale;
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The finalizer on every Trigger.
pub const FINALIZER: &str = "sless.kube5s.ru/trigger-cleanup";
/// Requeue while the target function is not Ready.
pub const REQUEUE_WAITING: Duration = Duration::from_secs(15);
/// Periodic requeue of active triggers (self-healing).
pub const REQUEUE_ACTIVE: Duration = Duration::from_secs(60);

/// The next run time of `schedule` after `now`, RFC 3339 in UTC: what the
/// CronJob built from it (time zone UTC, minute resolution, see
/// [`builders::cron_job_schedule`]) will do. `None` for a schedule that does
/// not parse, that Kubernetes cannot run (seconds other than 0), or that
/// never fires again.
pub fn next_run_at(schedule: &str, now: DateTime<Utc>) -> Option<String> {
    let cron_job = builders::cron_job_schedule(schedule).ok()?;
    let cron = sless_wire::validate::cron_schedule("schedule", &cron_job).ok()?;
    let next = cron.find_next_occurrence(&now, false).ok()?;
    Some(next.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// A Job's place in the order of runs: creation time, then name.
fn job_key(job: &Job) -> (Timestamp, String) {
    let created = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    (created, job.metadata.name.clone().unwrap_or_default())
}

/// The watermark stored in the status, as a key (`None`: nothing counted
/// yet; an unreadable time counts as the epoch).
fn counted_key(c: &CountedRun) -> (Timestamp, String) {
    let created = c.created_at.parse().unwrap_or(Timestamp::UNIX_EPOCH);
    (created, c.job.clone())
}

/// When a finished Job ended: its completion time, or (a failed Job has
/// none) the time its `Failed` / `Complete` condition was set.
fn finished_at(job: &Job) -> Option<Timestamp> {
    let status = job.status.as_ref()?;
    if let Some(t) = &status.completion_time {
        return Some(t.0);
    }
    status
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.status == "True" && matches!(c.type_.as_str(), "Failed" | "Complete"))
        .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
        .max()
}

/// The run a finished Job records, or `None` while it runs.
fn run_of(job: &Job) -> Option<TriggerRunStatus> {
    let (ok, why) = job_outcome(job)?;
    let (created, name) = job_key(job);
    let started = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0)
        .unwrap_or(created);
    let completed = finished_at(job).unwrap_or(started);
    let message = (!ok).then(|| {
        if why.is_empty() {
            "the call failed; see the trigger log".to_string()
        } else {
            format!("the call failed ({why}); see the trigger log")
        }
    });
    Some(TriggerRunStatus {
        job: name,
        started_at: started.to_string(),
        completed_at: completed.to_string(),
        ok,
        message,
    })
}

/// Records the cron runs seen in `jobs` (the trigger's Jobs) in `st`:
/// every Job created after the `counted` watermark is a new run (`runs` is
/// monotonic: Jobs deleted by their TTL or the history limit are never
/// counted again), and the newest finished Job becomes `lastRun` unless the
/// recorded one is newer (a Job already cleaned up).
pub fn observe_runs(st: &mut TriggerStatus, jobs: &[Job]) {
    let watermark = st.counted.as_ref().map(counted_key);
    let mut newest = watermark.clone();
    for key in jobs.iter().map(job_key) {
        if watermark.as_ref().is_none_or(|w| key > *w) {
            st.runs = st.runs.saturating_add(1);
        }
        if newest.as_ref().is_none_or(|n| key > *n) {
            newest = Some(key);
        }
    }
    if newest != watermark
        && let Some((created, job)) = newest
    {
        st.counted = Some(CountedRun {
            job,
            created_at: created.to_string(),
        });
    }
    let last = jobs
        .iter()
        .filter_map(|j| run_of(j).map(|r| (job_key(j), r)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, r)| r);
    if let Some(run) = last {
        let parse = |s: &str| s.parse::<Timestamp>().ok();
        let older = st.last_run.as_ref().is_some_and(|cur| {
            cur.job != run.job && parse(&cur.started_at) > parse(&run.started_at)
        });
        if !older {
            st.last_run = Some(run);
        }
    }
}

/// Lists the trigger's cron Jobs and records them in `st`. The fields are
/// informational, so a failed list keeps the previous values (and is
/// logged) rather than failing the reconcile.
async fn record_runs(ctx: &Ctx, ns: &str, name: &str, st: &mut TriggerStatus) {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &names::deploy_namespace(ns));
    let selector = names::owner_selector(OwnerKind::Trigger, ns, name);
    match jobs.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => observe_runs(st, &list.items),
        Err(e) => {
            tracing::warn!(trigger = %format!("{ns}/{name}"), error = %e, "cannot list cron Jobs")
        }
    }
}

/// `s` without the cron run fields.
fn without_runs(s: &TriggerStatus) -> TriggerStatus {
    TriggerStatus {
        next_run_at: None,
        last_run: None,
        runs: 0,
        counted: None,
        ..s.clone()
    }
}

impl Reconciled for Trigger {
    const CONTROLLER: &'static str = "trigger";
    const FINALIZER: &'static str = FINALIZER;
    const OWNER: OwnerKind = OwnerKind::Trigger;
}

/// Reconciles one Trigger (the finalizer wraps apply and cleanup).
pub async fn reconcile(t: Arc<Trigger>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    reconcile_with_finalizer(t, ctx, apply, cleanup).await
}

/// What to do after a failed reconcile: retry with a per-object backoff.
pub fn error_policy(t: Arc<Trigger>, err: &KubeError, ctx: Arc<Ctx>) -> Action {
    let key = t.failure_key();
    tracing::warn!(trigger = %key, error = %err, "reconcile failed");
    Action::requeue(ctx.failure_backoff(&key))
}

async fn apply(t: Arc<Trigger>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = t.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let name = t.name_any();
    let api: Api<Trigger> = Api::namespaced(ctx.client.clone(), &ns);
    let deploy_ns = names::deploy_namespace(&ns);
    let child = names::workload_name(OwnerKind::Trigger, &name);
    let old = t.status.clone().unwrap_or_default();
    let mut st = old.clone();
    let is_http = t.spec.trigger_type == "http";
    if is_http {
        st.url = Some(builders::trigger_url(&ctx.opts, &ns, &name));
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    // A cron trigger's CronJob (suspended while disabled), or why Kubernetes
    // cannot run its schedule.
    let cron = match (&t.spec.schedule, is_http) {
        (Some(schedule), false) => Some(builders::cron_job(
            &ns,
            &name,
            &t.spec.function,
            schedule,
            t.spec.payload.as_deref(),
            !t.spec.enabled,
        )),
        _ => None,
    };
    if let Some(Err(e)) = &cron {
        // The API refuses such schedules; this one was written past it
        // (kubectl) or before it did. No CronJob can run it, so none is left
        // running an older schedule, and the status says why.
        delete_if_present(
            &Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns),
            &child,
        )
        .await?;
        let phase = if t.spec.enabled {
            "Waiting"
        } else {
            "Disabled"
        };
        st.phase = Some(phase.into());
        st.message = Some(e.message.clone());
        st.next_run_at = None;
        set_condition(
            &mut st.conditions,
            "Ready",
            false,
            "UnsupportedSchedule",
            &e.message,
        );
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    }

    if !t.spec.enabled {
        if is_http {
            delete_http_children(&ctx, &deploy_ns, &child).await?;
            delete_operator_ingress(&ctx, &ns, &name).await?;
        } else if let Some(Ok(cj)) = &cron {
            Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns)
                .patch(&child, &pp, &Patch::Apply(cj))
                .await?;
            // A run that was going when the trigger was disabled still counts.
            record_runs(&ctx, &ns, &name, &mut st).await;
        }
        st.phase = Some("Disabled".into());
        st.message = None;
        st.next_run_at = None;
        set_condition(
            &mut st.conditions,
            "Ready",
            false,
            "Disabled",
            "enabled = false",
        );
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    }

    let functions: Api<Function> = Api::namespaced(ctx.client.clone(), &ns);
    let target = functions.get_opt(&t.spec.function).await?;
    let phase = target
        .as_ref()
        .filter(|f| f.metadata.deletion_timestamp.is_none())
        .and_then(|f| f.status.as_ref())
        .and_then(|s| s.phase.clone());
    if phase.as_deref() != Some("Ready") {
        let why = match (&target, phase) {
            (None, _) => format!("function {:?} does not exist", t.spec.function),
            (Some(_), p) => format!(
                "function {:?} is {}",
                t.spec.function,
                p.as_deref().unwrap_or("Pending")
            ),
        };
        st.phase = Some("Waiting".into());
        st.message = Some(why.clone());
        st.next_run_at = None;
        set_condition(&mut st.conditions, "Ready", false, "FunctionNotReady", &why);
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::requeue(REQUEUE_WAITING));
    }

    // Ready, so it exists.
    let Some(function) = target else {
        return Err(KubeError::Incomplete("function"));
    };
    let mut requeue = REQUEUE_ACTIVE;
    if is_http {
        // The new route is applied before the old one is removed.
        match HttpRoute::for_min_instances(function.spec.min_instances) {
            HttpRoute::Direct => {
                let (svc, ing) = builders::http_trigger(&ctx.opts, &ns, &name, &t.spec.function);
                Api::<Service>::namespaced(ctx.client.clone(), &deploy_ns)
                    .patch(&child, &pp, &Patch::Apply(&svc))
                    .await?;
                Api::<Ingress>::namespaced(ctx.client.clone(), &deploy_ns)
                    .patch(&child, &pp, &Patch::Apply(&ing))
                    .await?;
                delete_operator_ingress(&ctx, &ns, &name).await?;
            }
            HttpRoute::ViaOperator => {
                let ing = builders::operator_trigger_ingress(&ctx.opts, &ns, &name);
                Api::<Ingress>::namespaced(ctx.client.clone(), &ctx.opts.operator_namespace)
                    .patch(
                        &builders::operator_ingress_name(&ns, &name),
                        &pp,
                        &Patch::Apply(&ing),
                    )
                    .await?;
                delete_http_children(&ctx, &deploy_ns, &child).await?;
            }
        }
    } else {
        // No schedule (an unsupported one was answered above).
        let (Some(schedule), Some(Ok(cj))) = (&t.spec.schedule, &cron) else {
            st.phase = Some("Waiting".into());
            st.message = Some("a cron trigger needs a schedule".into());
            st.next_run_at = None;
            patch_status(&api, &name, &old, &st).await?;
            return Ok(Action::await_change());
        };
        Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns)
            .patch(&child, &pp, &Patch::Apply(cj))
            .await?;
        record_runs(&ctx, &ns, &name, &mut st).await;
        st.next_run_at = next_run_at(schedule, Utc::now());
        if function.spec.min_instances == 0
            && let Some(wait) =
                warm_for_next_run(&ctx, &function, st.next_run_at.as_deref()).await?
        {
            requeue = requeue.min(wait);
        }
    }
    st.phase = Some("Active".into());
    st.message = None;
    set_condition(
        &mut st.conditions,
        "Ready",
        true,
        "Active",
        "children applied",
    );
    // Recorded runs and the next run time change by themselves: only a
    // change of anything else (becoming Active) is an event.
    if status_changed(&without_runs(&old), &without_runs(&st)) {
        ctx.event(
            t.as_ref(),
            EventType::Normal,
            "Active",
            format!("calls function {}", t.spec.function),
        )
        .await;
    }
    patch_status(&api, &name, &old, &st).await?;
    Ok(Action::requeue(requeue))
}

/// Keeps a function that scales to zero running for a cron run: within
/// [`scale::CRON_WARM_LEAD`] of `next_run` its [`scale::KEEP_UNTIL`]
/// annotation is moved to the run's end (a merge patch, only when that is
/// later than the recorded one), which makes the Function controller scale
/// it up before the CronJob calls it. Returns when to look again (the start
/// of the lead), if that is before the usual requeue.
async fn warm_for_next_run(
    ctx: &Ctx,
    function: &Function,
    next_run: Option<&str>,
) -> Result<Option<Duration>, KubeError> {
    let now = Timestamp::now();
    let next = next_run.and_then(|n| n.parse::<Timestamp>().ok());
    let (keep, wait) = scale::cron_warm(next, now, function.spec.timeout_sec);
    if let Some(keep) = keep
        && scale::keep_until(function.metadata.annotations.as_ref(), now).is_none_or(|k| k < keep)
    {
        let ns = function
            .namespace()
            .ok_or(KubeError::Incomplete("namespace"))?;
        let patch = serde_json::json!({
            "metadata": { "annotations": { scale::KEEP_UNTIL: keep.to_string() } }
        });
        Api::<Function>::namespaced(ctx.client.clone(), &ns)
            .patch(
                &function.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    Ok(wait)
}

/// Deletes the Ingress of an http trigger routed through the operator (in
/// the operator's namespace); tolerates it being gone already.
async fn delete_operator_ingress(ctx: &Ctx, ns: &str, trigger: &str) -> Result<(), KubeError> {
    delete_if_present(
        &Api::<Ingress>::namespaced(ctx.client.clone(), &ctx.opts.operator_namespace),
        &builders::operator_ingress_name(ns, trigger),
    )
    .await
}

/// Deletes the Ingress and Service of an http trigger (its child `child` in
/// `deploy_ns`); tolerates them being gone already.
async fn delete_http_children(ctx: &Ctx, deploy_ns: &str, child: &str) -> Result<(), KubeError> {
    delete_if_present(
        &Api::<Ingress>::namespaced(ctx.client.clone(), deploy_ns),
        child,
    )
    .await?;
    delete_if_present(
        &Api::<Service>::namespaced(ctx.client.clone(), deploy_ns),
        child,
    )
    .await
}

/// Deletes the Ingress, Service and CronJob of a trigger; tolerates them
/// being gone already.
async fn cleanup(t: Arc<Trigger>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = t.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let deploy_ns = names::deploy_namespace(&ns);
    let child = names::workload_name(OwnerKind::Trigger, &t.name_any());
    delete_http_children(&ctx, &deploy_ns, &child).await?;
    delete_operator_ingress(&ctx, &ns, &t.name_any()).await?;
    delete_if_present(
        &Api::<CronJob>::namespaced(ctx.client.clone(), &deploy_ns),
        &child,
    )
    .await?;
    Ok(Action::await_change())
}

/// Runs the Trigger controller until `shutdown` completes: watches Triggers
/// and, by owner label, their Services, Ingresses, CronJobs and cron Jobs.
pub async fn run(ctx: Arc<Ctx>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    Controlled::<Trigger>::new(&ctx)
        .owns::<Service>()
        .owns::<Ingress>()
        .owns::<CronJob>()
        .owns::<Job>()
        .run(ctx, shutdown, reconcile, error_policy)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// A cron Job created at `10:<min>:00`; `state` is `active`,
    /// `succeeded` (done 2 s after start) or `failed` (3 s after start).
    fn job(name: &str, min: u32, state: &str) -> Job {
        let t = |sec: u32| format!("2026-12-02T10:{min:02}:{sec:02}Z");
        let status = match state {
            "active" => serde_json::json!({"active": 1, "startTime": t(1)}),
            "succeeded" => serde_json::json!({
                "succeeded": 1, "startTime": t(1), "completionTime": t(3),
                "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": t(3)}]
            }),
            _ => serde_json::json!({
                "failed": 1, "startTime": t(1),
                "conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": t(4),
                                "reason": "BackoffLimitExceeded",
                                "message": "Job has reached the specified backoff limit"}]
            }),
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "creationTimestamp": t(0)},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn next_run_is_computed_in_utc_from_the_schedule() {
        let now = at("2026-12-02T10:03:20Z");
        assert_eq!(
            next_run_at("*/5 * * * *", now).as_deref(),
            Some("2026-12-02T10:05:00Z")
        );
        assert_eq!(
            next_run_at("0 0 * * *", now).as_deref(),
            Some("2026-12-03T00:00:00Z")
        );
        assert_eq!(
            next_run_at("@hourly", now).as_deref(),
            Some("2026-12-02T11:00:00Z")
        );
        // Exactly on a tick: the next one, not now.
        assert_eq!(
            next_run_at("*/5 * * * *", at("2026-12-02T10:05:00Z")).as_deref(),
            Some("2026-12-02T10:10:00Z")
        );
        assert_eq!(next_run_at("not a schedule", now), None);
        // Six fields: seconds = 0 is the five-field schedule the CronJob
        // gets; other seconds cannot run on Kubernetes, so no next run.
        assert_eq!(
            next_run_at("0 */5 * * * *", now).as_deref(),
            Some("2026-12-02T10:05:00Z")
        );
        assert_eq!(next_run_at("*/10 * * * * *", now), None);
        assert_eq!(next_run_at("30 */5 * * * *", now), None);
    }

    #[test]
    fn runs_are_counted_once_and_the_newest_finished_job_is_the_last_run() {
        let mut st = TriggerStatus::default();
        let jobs = vec![
            job("tr-web-1", 10, "active"),
            job("tr-web-0", 0, "succeeded"),
            job("tr-web-05", 5, "failed"),
        ];
        observe_runs(&mut st, &jobs);
        assert_eq!(st.runs, 3, "a started run counts");
        assert_eq!(
            st.counted,
            Some(CountedRun {
                job: "tr-web-1".into(),
                created_at: "2026-12-02T10:10:00Z".into()
            })
        );
        let last = st.last_run.clone().unwrap();
        assert_eq!(last.job, "tr-web-05", "the running Job is not finished");
        assert!(!last.ok);
        assert_eq!(last.started_at, "2026-12-02T10:05:01Z");
        assert_eq!(
            last.completed_at, "2026-12-02T10:05:04Z",
            "a failed Job ends when its Failed condition was set"
        );
        assert!(
            last.message
                .as_deref()
                .unwrap()
                .contains("BackoffLimitExceeded"),
            "{last:?}"
        );

        // Seen again (another reconcile): nothing is counted twice.
        let before = st.clone();
        observe_runs(&mut st, &jobs);
        assert_eq!(st, before);

        // The running Job succeeds and the oldest is cleaned up by its TTL.
        let jobs = vec![
            job("tr-web-05", 5, "failed"),
            job("tr-web-1", 10, "succeeded"),
        ];
        observe_runs(&mut st, &jobs);
        assert_eq!(st.runs, 3);
        let last = st.last_run.clone().unwrap();
        assert_eq!(last.job, "tr-web-1");
        assert!(last.ok && last.message.is_none());
        assert_eq!(last.completed_at, "2026-12-02T10:10:03Z");

        // Every Job gone: the record stays.
        observe_runs(&mut st, &[]);
        assert_eq!(st.runs, 3);
        assert_eq!(st.last_run.as_ref().unwrap().job, "tr-web-1");

        // A new tick.
        observe_runs(&mut st, &[job("tr-web-2", 15, "active")]);
        assert_eq!(st.runs, 4);
        assert_eq!(st.last_run.as_ref().unwrap().job, "tr-web-1");
    }

    #[test]
    fn a_recorded_newer_run_is_not_replaced_by_an_older_job() {
        let mut st = TriggerStatus {
            last_run: Some(TriggerRunStatus {
                job: "tr-web-9".into(),
                started_at: "2026-12-02T11:00:01Z".into(),
                completed_at: "2026-12-02T11:00:02Z".into(),
                ok: true,
                message: None,
            }),
            runs: 7,
            counted: Some(CountedRun {
                job: "tr-web-9".into(),
                created_at: "2026-12-02T11:00:00Z".into(),
            }),
            ..Default::default()
        };
        observe_runs(&mut st, &[job("tr-web-0", 0, "failed")]);
        assert_eq!(st.runs, 7, "older than the watermark: already counted");
        assert_eq!(st.last_run.as_ref().unwrap().job, "tr-web-9");
        assert_eq!(st.counted.as_ref().unwrap().job, "tr-web-9");
    }

    #[test]
    fn run_fields_are_not_an_active_change() {
        let a = TriggerStatus {
            phase: Some("Active".into()),
            ..Default::default()
        };
        let mut b = a.clone();
        b.runs = 2;
        b.next_run_at = Some("2026-12-02T10:05:00Z".into());
        assert!(status_changed(&a, &b), "patched");
        assert!(
            !status_changed(&without_runs(&a), &without_runs(&b)),
            "no event"
        );
    }
}
