//! Wire types shared by `sless-operator` and `terraform-provider-sless`.
//!
//! Everything both sides must agree on lives here, so they cannot drift:
//! the REST paths ([`paths`]), request and response bodies ([`function`]),
//! triggers, jobs and services ([`trigger`], [`job`], [`service`]),
//! the invocation log's records ([`invocation`]), secret env vars ([`secret`]), the error body ([`error`]), field limits and validation rules
//! ([`limits`], [`validate`]), the runtime list ([`runtime`]) and the
//! namespace rule ([`namespace`]).

pub mod error;
pub mod function;
pub mod invocation;
pub mod job;
pub mod limits;
pub mod namespace;
pub mod paths;
pub mod runtime;
pub mod secret;
pub mod service;
pub mod trigger;
pub mod validate;

pub use error::{ApiError, ErrorBody, ErrorCode};
pub use function::{
    CodeUpload, CreateFunction, Function, FunctionList, FunctionStatus, NamespaceInfo, Phase,
    UpdateFunction,
};
pub use invocation::{Invocation, InvocationList, InvocationQuery, InvocationSource};
pub use job::{CreateJob, Job, JobList, JobPhase, JobSpec, JobStatus, UpdateJob};
pub use namespace::namespace_for_sub;
pub use runtime::Runtime;
pub use secret::{SecretEnv, SecretValues, secret_hash};
pub use service::{CreateService, Service, ServiceList, ServiceSpec, ServiceStatus, UpdateService};
pub use trigger::{
    CreateTrigger, Trigger, TriggerList, TriggerPhase, TriggerRun, TriggerSpec, TriggerStatus,
    TriggerType, UpdateTrigger,
};
pub use validate::FieldError;
