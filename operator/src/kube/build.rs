//! The build state machine shared by the Function, FunctionJob and Service
//! controllers. It cannot loop: the image tag is derived from the code key,
//! the kaniko Job is named after it and created only when `status.build`
//! does not record that tag yet (a guard that survives restarts, since it
//! lives in the object's status); a Job that already exists (the operator
//! died between create and status write) is adopted; a failed build stays
//! failed until new code brings a new tag.

use super::KubeError;
use super::builders;
use super::controller_util::is_status;
use super::crd::{BuildState, BuildStatus};
use super::function::{Ctx, job_outcome};
use super::names::{self, OwnerKind};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};

/// Where the build of the current code key stands after one [`step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The kaniko Job was just created.
    Started,
    /// It is still running.
    Running,
    /// The image is pushed.
    Succeeded,
    /// It failed; `why` is set when the failure was observed just now.
    Failed {
        /// The reason, on the step that saw the failure.
        why: Option<String>,
    },
}

/// What is being built.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Owner kind.
    pub kind: OwnerKind,
    /// Owner (user) namespace.
    pub namespace: &'a str,
    /// Owner name.
    pub name: &'a str,
    /// The code key (object key of the build context).
    pub code_key: &'a str,
}

impl Target<'_> {
    /// The image tag: first 12 hex of sha256 of the code key.
    pub fn tag(&self) -> String {
        names::image_tag(self.code_key)
    }

    /// `<registry>/<ns>/<name>:<tag>`.
    pub fn image(&self, registry: &str) -> String {
        names::image_ref(registry, self.namespace, self.name, &self.tag())
    }

    /// The kaniko Job's name.
    pub fn job_name(&self) -> String {
        names::build_job_name(self.kind, self.name, &self.tag())
    }
}

/// Advances the build of `t` by one step, updating `build` (the object's
/// `status.build`) in place.
pub async fn step(
    ctx: &Ctx,
    t: Target<'_>,
    build: &mut Option<BuildStatus>,
) -> Result<Progress, KubeError> {
    let tag = t.tag();
    let job_name = t.job_name();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &names::deploy_namespace(t.namespace));
    let state = build.as_ref().filter(|b| b.tag == tag).map(|b| b.state);
    let progress = match state {
        None => {
            let image = t.image(&ctx.opts.registry);
            let job = builders::kaniko_job(
                &ctx.opts,
                t.kind,
                t.namespace,
                t.name,
                &tag,
                t.code_key,
                &image,
            );
            match jobs.create(&PostParams::default(), &job).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {}
                Err(e) => return Err(e.into()),
            }
            *build = Some(BuildStatus {
                tag,
                job: job_name,
                state: BuildState::Running,
            });
            return Ok(Progress::Started);
        }
        Some(BuildState::Succeeded) => return Ok(Progress::Succeeded),
        Some(BuildState::Failed) => return Ok(Progress::Failed { why: None }),
        Some(BuildState::Running) => match jobs.get_opt(&job_name).await? {
            None => Some((
                false,
                format!("build Job {job_name} disappeared before finishing"),
            )),
            Some(job) => job_outcome(&job),
        },
    };
    let (state, progress) = match progress {
        None => (BuildState::Running, Progress::Running),
        Some((true, _)) => (BuildState::Succeeded, Progress::Succeeded),
        Some((false, why)) => (BuildState::Failed, Progress::Failed { why: Some(why) }),
    };
    if let Some(b) = build.as_mut() {
        b.state = state;
    }
    Ok(progress)
}
