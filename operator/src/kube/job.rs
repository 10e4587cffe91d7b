//! The FunctionJob controller: build the code (the shared build state
//! machine), then run the entrypoint once per generation in a k8s Job (the
//! runtime's `--once` mode, input from a ConfigMap), read the result from the
//! pod log and record it in `status.message` (Succeeded) or `status.error`
//! (Failed). A generation that finished is never run again; bumping `runId`
//! (a new generation) reruns without rebuilding.

use super::KubeError;
use super::build::{self, Progress};
use super::builders::{self, RESULT_MARKER, Workload};
use super::controller_util::{
    Controlled, Reconciled, delete_all_if_present, delete_if_present, is_status, patch_status,
    reconcile_with_finalizer,
};
use super::crd::FunctionJob;
use super::function::{Ctx, job_outcome, set_condition};
use super::names::{self, OwnerKind};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use sless_wire::job::JOB_RESULT_MAX_BYTES;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The finalizer on every FunctionJob.
pub const FINALIZER: &str = "sless.kube5s.ru/functionjob-cleanup";
/// Requeue while building or running.
pub const REQUEUE_ACTIVE: Duration = Duration::from_secs(5);
/// Most log bytes read from a run's pod.
pub const LOG_LIMIT_BYTES: i64 = 2 * 1024 * 1024;
/// Most bytes of output kept in `status.error`.
pub const ERROR_TAIL_BYTES: usize = 4096;

/// What a run's pod log says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunResult {
    /// The handler returned; the JSON-encoded value.
    Returned(String),
    /// The handler raised, or the result is unusable; the reason.
    Raised(String),
    /// No result line (killed, timed out, entrypoint failed to load).
    Missing,
}

fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

/// Reads the result after the last [`RESULT_MARKER`] line of a run's log.
/// A result over `JOB_RESULT_MAX_BYTES` is refused (never truncated JSON).
pub fn parse_run_log(log: &str) -> RunResult {
    let Some(pos) = log.rfind(&format!("\n{RESULT_MARKER}\n")) else {
        return RunResult::Missing;
    };
    let after = log[pos + RESULT_MARKER.len() + 2..].trim();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(after) else {
        return RunResult::Missing;
    };
    if v["ok"] == serde_json::Value::Bool(true) {
        let result = serde_json::to_string(&v["result"]).unwrap_or_else(|_| "null".into());
        if result.len() > JOB_RESULT_MAX_BYTES {
            return RunResult::Raised(format!(
                "the result is {} bytes, over the limit of {JOB_RESULT_MAX_BYTES} bytes",
                result.len()
            ));
        }
        return RunResult::Returned(result);
    }
    let kind = v["type"].as_str().unwrap_or("Error");
    let msg = v["error"].as_str().unwrap_or("the handler failed");
    RunResult::Raised(format!("{kind}: {msg}"))
}

/// The user's own output before the marker (for error messages).
pub fn output_before_marker(log: &str) -> &str {
    match log.rfind(&format!("\n{RESULT_MARKER}\n")) {
        Some(pos) => &log[..pos],
        None => log,
    }
}

/// The name of the k8s Job (and input ConfigMap) of one generation.
pub fn run_name(name: &str, generation: i64) -> String {
    let g = generation.to_string();
    format!("{}-{g}", names::child_name("run", name, 63 - g.len() - 1))
}

impl Reconciled for FunctionJob {
    const CONTROLLER: &'static str = "job";
    const FINALIZER: &'static str = FINALIZER;
    const OWNER: OwnerKind = OwnerKind::FunctionJob;
}

/// Reconciles one FunctionJob (the finalizer wraps apply and cleanup).
pub async fn reconcile(j: Arc<FunctionJob>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    reconcile_with_finalizer(j, ctx, apply, cleanup).await
}

/// What to do after a failed reconcile: retry with a per-object backoff.
pub fn error_policy(j: Arc<FunctionJob>, err: &KubeError, ctx: Arc<Ctx>) -> Action {
    let key = j.failure_key();
    tracing::warn!(job = %key, error = %err, "reconcile failed");
    Action::requeue(ctx.failure_backoff(&key))
}

async fn apply(j: Arc<FunctionJob>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = j.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let name = j.name_any();
    let generation = j.metadata.generation.unwrap_or(1);
    let api: Api<FunctionJob> = Api::namespaced(ctx.client.clone(), &ns);
    let old = j.status.clone().unwrap_or_default();
    let mut st = old.clone();
    let finished = matches!(st.phase.as_deref(), Some("Succeeded" | "Failed"));
    if st.observed_generation == Some(generation) && finished {
        // This generation ran; only a new generation runs again.
        return Ok(Action::await_change());
    }
    if st.observed_generation != Some(generation) {
        st.observed_generation = Some(generation);
        st.message = None;
        st.error = None;
        st.started_at = None;
        st.completed_at = None;
        st.run = None;
    }
    let Some(code) = j.spec.code.clone() else {
        st.phase = Some("Pending".into());
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    };
    let Some(runtime) = j.spec.runtime.parse::<sless_wire::Runtime>().ok() else {
        st.phase = Some("Failed".into());
        st.error = Some(format!("unknown runtime {:?}", j.spec.runtime));
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::await_change());
    };
    let target = build::Target {
        kind: OwnerKind::FunctionJob,
        namespace: &ns,
        name: &name,
        code_key: &code.key,
    };
    let image = target.image(&ctx.opts.registry);
    match build::step(&ctx, target, &mut st.build).await? {
        Progress::Started | Progress::Running => {
            st.phase = Some("Building".into());
            set_condition(&mut st.conditions, "Built", false, "Building", &image);
            patch_status(&api, &name, &old, &st).await?;
            return Ok(Action::requeue(REQUEUE_ACTIVE));
        }
        Progress::Failed { why } => {
            st.phase = Some("Failed".into());
            st.error = Some(format!(
                "build failed: {}; see the build log",
                why.as_deref().unwrap_or("the kaniko Job failed")
            ));
            st.completed_at = Some(Timestamp::now().to_string());
            set_condition(&mut st.conditions, "Built", false, "BuildFailed", "");
            ctx.event(
                j.as_ref(),
                EventType::Warning,
                "BuildFailed",
                st.error.clone().unwrap_or_default(),
            )
            .await;
            patch_status(&api, &name, &old, &st).await?;
            return Ok(Action::await_change());
        }
        Progress::Succeeded => {
            st.image_ref = Some(image.clone());
            set_condition(&mut st.conditions, "Built", true, "Built", &image);
        }
    }

    let deploy_ns = names::deploy_namespace(&ns);
    let run = run_name(&name, generation);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &deploy_ns);
    if st.run.as_deref() != Some(run.as_str()) {
        let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &deploy_ns);
        let cm = builders::job_input_config_map(&ns, &name, &run, &j.spec.input);
        match cms.create(&PostParams::default(), &cm).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
        let w = Workload {
            kind: OwnerKind::FunctionJob,
            namespace: &ns,
            name: &name,
            runtime,
            entrypoint: &j.spec.entrypoint,
            env_vars: &j.spec.env_vars,
            secret_env_vars: &j.spec.secret_env_vars,
            memory_mb: j.spec.memory_mb,
            timeout_sec: j.spec.timeout_sec,
            image: &image,
        };
        match jobs
            .create(
                &PostParams::default(),
                &builders::runtime_job(&ctx.opts, &w, &run),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
        st.run = Some(run.clone());
        st.phase = Some("Running".into());
        st.started_at = Some(Timestamp::now().to_string());
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::requeue(REQUEUE_ACTIVE));
    }

    let outcome = match jobs.get_opt(&run).await? {
        None => Some((false, format!("run Job {run} disappeared before finishing"))),
        Some(job) => job_outcome(&job),
    };
    let Some((_, why)) = outcome else {
        patch_status(&api, &name, &old, &st).await?;
        return Ok(Action::requeue(REQUEUE_ACTIVE));
    };
    let log = read_run_log(&ctx, &deploy_ns, &run).await?;
    match parse_run_log(&log) {
        RunResult::Returned(result) => {
            st.phase = Some("Succeeded".into());
            st.message = Some(result);
        }
        RunResult::Raised(err) => {
            st.phase = Some("Failed".into());
            st.error = Some(format!(
                "{err}\n{}",
                tail(output_before_marker(&log), ERROR_TAIL_BYTES)
            ));
        }
        RunResult::Missing => {
            st.phase = Some("Failed".into());
            let why = if why.is_empty() {
                "the run produced no result".to_string()
            } else {
                why
            };
            st.error = Some(format!("{why}\n{}", tail(&log, ERROR_TAIL_BYTES)));
        }
    }
    st.completed_at = Some(Timestamp::now().to_string());
    let ok = st.phase.as_deref() == Some("Succeeded");
    set_condition(
        &mut st.conditions,
        "Complete",
        ok,
        if ok { "Succeeded" } else { "Failed" },
        "",
    );
    ctx.event(
        j.as_ref(),
        if ok {
            EventType::Normal
        } else {
            EventType::Warning
        },
        if ok { "RunSucceeded" } else { "RunFailed" },
        format!("generation {generation}"),
    )
    .await;
    patch_status(&api, &name, &old, &st).await?;
    Ok(Action::await_change())
}

async fn read_run_log(ctx: &Ctx, deploy_ns: &str, run: &str) -> Result<String, KubeError> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), deploy_ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={run}")))
        .await?;
    let Some(pod) = list.items.first() else {
        return Ok(String::new());
    };
    let lp = LogParams {
        container: Some("function".to_string()),
        limit_bytes: Some(LOG_LIMIT_BYTES),
        ..Default::default()
    };
    match pods.logs(&pod.name_any(), &lp).await {
        Ok(log) => Ok(log),
        Err(e) if is_status(&e, 400) || is_status(&e, 404) => Ok(String::new()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the build and run Jobs and input ConfigMaps of a job.
async fn cleanup(j: Arc<FunctionJob>, ctx: Arc<Ctx>) -> Result<Action, KubeError> {
    let ns = j.namespace().ok_or(KubeError::Incomplete("namespace"))?;
    let deploy_ns = names::deploy_namespace(&ns);
    let lp = ListParams::default().labels(&names::owner_selector(
        OwnerKind::FunctionJob,
        &ns,
        &j.name_any(),
    ));
    delete_all_if_present(&Api::<Job>::namespaced(ctx.client.clone(), &deploy_ns), &lp).await?;
    delete_all_if_present(
        &Api::<ConfigMap>::namespaced(ctx.client.clone(), &deploy_ns),
        &lp,
    )
    .await?;
    if !j.spec.secret_env_vars.is_empty() {
        delete_if_present(
            &Api::<Secret>::namespaced(ctx.client.clone(), &deploy_ns),
            &names::env_secret_name(OwnerKind::FunctionJob, &j.name_any()),
        )
        .await?;
    }
    Ok(Action::await_change())
}

/// Runs the FunctionJob controller until `shutdown` completes: watches
/// FunctionJobs and, by owner label, their build and run Jobs.
pub async fn run(ctx: Arc<Ctx>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    Controlled::<FunctionJob>::new(&ctx)
        .owns::<Job>()
        .run(ctx, shutdown, reconcile, error_policy)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_after_the_marker_is_the_message() {
        let log = format!(
            "user print\nmore\n\n{RESULT_MARKER}\n{{\"ok\": true, \"result\": {{\"n\": 3}}}}\n"
        );
        assert_eq!(parse_run_log(&log), RunResult::Returned("{\"n\":3}".into()));
        assert_eq!(output_before_marker(&log), "user print\nmore\n");
    }

    #[test]
    fn raised_missing_and_oversized_results() {
        let log = format!(
            "Traceback...\n\n{RESULT_MARKER}\n{{\"ok\": false, \"error\": \"boom\", \"type\": \"ValueError\"}}"
        );
        assert_eq!(
            parse_run_log(&log),
            RunResult::Raised("ValueError: boom".into())
        );
        assert_eq!(parse_run_log("killed\n"), RunResult::Missing);
        assert_eq!(
            parse_run_log(&format!("\n{RESULT_MARKER}\n")),
            RunResult::Missing
        );
        let big = "x".repeat(JOB_RESULT_MAX_BYTES + 1);
        let log = format!("\n{RESULT_MARKER}\n{{\"ok\": true, \"result\": \"{big}\"}}");
        assert!(
            matches!(parse_run_log(&log), RunResult::Raised(m) if m.contains("over the limit"))
        );
        // A fake marker printed by the user earlier is superseded by the last one.
        let log = format!(
            "\n{RESULT_MARKER}\n{{\"ok\": true, \"result\": 1}}\n\n{RESULT_MARKER}\n{{\"ok\": true, \"result\": 2}}"
        );
        assert_eq!(parse_run_log(&log), RunResult::Returned("2".into()));
    }

    #[test]
    fn run_names_are_per_generation_and_bounded() {
        assert_eq!(run_name("hello", 3), "run-hello-3");
        assert!(run_name(&"a".repeat(63), 123456).len() <= 63);
        assert_eq!(tail("abcdef", 3), "…def");
    }
}
