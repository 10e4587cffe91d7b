//! The OpenAPI document, generated from the handlers and wire types.

use super::{code, functions, invoke, logs, namespaces, public, router, triggers};
use super::{funcs, invocations, jobs, metrics, public_services, services};
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use std::sync::OnceLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The operator's REST API.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "sless operator API",
        description = "Manage and invoke serverless functions. Every /v1 request carries `Authorization: Bearer <JWT>`; the `{ns}` of the path must be the namespace derived from the token's `sub` (`sless-` + the first 8 hex characters of sha256(sub)). Errors carry `{\"error\": {\"code\", \"message\", \"field\"}}`."
    ),
    paths(
        router::healthz,
        serve,
        metrics::serve,
        namespaces::ensure,
        functions::create,
        functions::list,
        functions::get,
        functions::update,
        functions::delete,
        code::upload,
        logs::read,
        invoke::invoke,
        invoke::invoke_rest,
        triggers::create,
        triggers::list,
        triggers::get,
        triggers::update,
        triggers::delete,
        triggers::logs,
        public::trigger,
        public::trigger_rest,
        jobs::create,
        jobs::list,
        jobs::get,
        jobs::update,
        jobs::delete,
        jobs::upload,
        jobs::logs,
        services::create,
        services::list,
        services::get,
        services::update,
        services::delete,
        services::upload,
        services::logs,
        public_services::service,
        public_services::service_rest,
        invocations::list,
        funcs::own,
        funcs::namespace,
    ),
    components(schemas(
        sless_wire::ErrorBody,
        sless_wire::ApiError,
        sless_wire::ErrorCode,
        sless_wire::NamespaceInfo,
        sless_wire::CreateFunction,
        sless_wire::UpdateFunction,
        sless_wire::Function,
        sless_wire::function::FunctionSpec,
        sless_wire::FunctionStatus,
        sless_wire::Phase,
        sless_wire::Runtime,
        sless_wire::FunctionList,
        sless_wire::function::LogKind,
        sless_wire::trigger::CreateTrigger,
        sless_wire::trigger::UpdateTrigger,
        sless_wire::trigger::Trigger,
        sless_wire::trigger::TriggerSpec,
        sless_wire::trigger::TriggerStatus,
        sless_wire::trigger::TriggerPhase,
        sless_wire::trigger::TriggerRun,
        sless_wire::trigger::TriggerType,
        sless_wire::trigger::TriggerList,
        sless_wire::CreateJob,
        sless_wire::UpdateJob,
        sless_wire::Job,
        sless_wire::JobSpec,
        sless_wire::JobStatus,
        sless_wire::JobPhase,
        sless_wire::JobList,
        sless_wire::CreateService,
        sless_wire::UpdateService,
        sless_wire::Service,
        sless_wire::ServiceSpec,
        sless_wire::ServiceStatus,
        sless_wire::ServiceList,
        sless_wire::Invocation,
        sless_wire::InvocationSource,
        sless_wire::InvocationList,
    )),
    modifiers(&BearerAuth, &ExtractorAnswers),
    tags(
        (name = "namespaces", description = "The caller's namespace"),
        (name = "functions", description = "Functions: definition, code, logs"),
        (name = "invoke", description = "Calling a function through the operator"),
        (name = "triggers", description = "Triggers: http (a public URL) and cron (a schedule)"),
        (name = "public", description = "Unauthenticated public URLs of http triggers"),
        (name = "jobs", description = "Jobs: run code once with an input and keep its return value"),
        (name = "services", description = "Services: long-running processes on a public URL"),
        (name = "invocations", description = "The invocation log: every proxied function call"),
        (name = "pages", description = "Server-rendered HTML pages (token in the header or `?token=`)"),
        (name = "meta", description = "Health, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// A raw binary body (a zip, or whatever a function accepts).
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct BinaryBody(#[allow(dead_code)] Vec<u8>);

/// Adds the `bearer` (JWT) security scheme the operations refer to.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// Documents the answers every handler can give before its own code runs,
/// because its extractors give them (`api/extract.rs`): 401 and 403 on each
/// operation behind the bearer scheme, 400 on each with a `{name}` in its
/// path (a name that is not a DNS-1123 label). Found missing by the API
/// fuzzer (scripts/api-fuzz.sh, docs/reliability.md).
struct ExtractorAnswers;

impl Modify for ExtractorAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let answer = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let with_name = path.contains("{name}");
            // (operation, whether it changes stored state)
            let ops = [
                (&mut item.get, false),
                (&mut item.put, true),
                (&mut item.post, true),
                (&mut item.delete, true),
                (&mut item.options, false),
                (&mut item.head, false),
                (&mut item.patch, true),
                (&mut item.trace, false),
            ];
            let ops = ops
                .into_iter()
                .filter_map(|(op, writes)| op.as_mut().map(|op| (writes, op)));
            for (writes, op) in ops {
                let bearer = op.security.as_ref().is_some_and(|s| !s.is_empty());
                let responses = &mut op.responses.responses;
                let mut add = |code: &str, description: &str| {
                    responses
                        .entry(code.to_string())
                        .or_insert_with(|| answer(description).into());
                };
                if with_name {
                    add(
                        "400",
                        "The name in the path is not a DNS-1123 label; `error.field` is `name`",
                    );
                }
                if bearer {
                    add("401", "Missing or invalid token");
                    add("403", "The token is for another namespace");
                }
                if bearer && writes {
                    add(
                        "507",
                        "The operator's data dir is full: nothing was changed; retry when \
                         space is freed",
                    );
                }
            }
        }
    }
}

/// The document as pretty JSON (built once).
pub fn document_json() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        ApiDoc::openapi().to_pretty_json().unwrap_or_else(|e| {
            format!("{{\"error\": \"cannot render the OpenAPI document: {e}\"}}")
        })
    })
}

/// Serves the OpenAPI document (no auth).
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "meta",
    responses((status = 200, description = "This OpenAPI document", content_type = "application/json"))
)]
pub async fn serve() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], document_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_lists_every_path_and_the_bearer_scheme() {
        let doc: serde_json::Value = serde_json::from_str(document_json()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for p in [
            "/healthz",
            "/openapi.json",
            "/metrics",
            "/v1/namespaces/{ns}/ensure",
            "/v1/namespaces/{ns}/functions",
            "/v1/namespaces/{ns}/functions/{name}",
            "/v1/namespaces/{ns}/functions/{name}/code",
            "/v1/namespaces/{ns}/functions/{name}/logs",
            "/v1/namespaces/{ns}/functions/{name}/invoke",
            "/v1/namespaces/{ns}/triggers",
            "/v1/namespaces/{ns}/triggers/{name}",
            "/v1/namespaces/{ns}/triggers/{name}/logs",
            "/t/{ns}/{name}",
            "/t/{ns}/{name}/{rest}",
            "/v1/namespaces/{ns}/jobs",
            "/v1/namespaces/{ns}/jobs/{name}",
            "/v1/namespaces/{ns}/jobs/{name}/code",
            "/v1/namespaces/{ns}/jobs/{name}/logs",
            "/v1/namespaces/{ns}/services",
            "/v1/namespaces/{ns}/services/{name}",
            "/v1/namespaces/{ns}/services/{name}/code",
            "/v1/namespaces/{ns}/services/{name}/logs",
            "/s/{ns}/{name}",
            "/s/{ns}/{name}/{rest}",
            "/v1/namespaces/{ns}/invocations",
            "/funcs",
            "/funcs/{ns}",
        ] {
            assert!(paths.contains_key(p), "missing {p}");
        }
        assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
        assert!(doc["components"]["schemas"]["CreateFunction"].is_object());
    }

    #[test]
    fn authenticated_writes_list_the_full_disk_answer_and_reads_do_not() {
        let doc: serde_json::Value = serde_json::from_str(document_json()).unwrap();
        let fns = &doc["paths"]["/v1/namespaces/{ns}/functions"];
        assert!(
            fns["post"]["responses"]["507"].is_object(),
            "{}",
            fns["post"]
        );
        assert!(fns["get"]["responses"]["507"].is_null(), "{}", fns["get"]);
        let code = &doc["paths"]["/v1/namespaces/{ns}/functions/{name}/code"];
        assert!(
            code["put"]["responses"]["507"].is_object(),
            "{}",
            code["put"]
        );
        // Public trigger URLs carry no token: not an API write.
        let public = &doc["paths"]["/t/{ns}/{name}"]["post"];
        assert!(public["responses"].is_object(), "{public}");
        assert!(public["responses"]["507"].is_null(), "{public}");
    }
}
