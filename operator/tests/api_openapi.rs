//! The served OpenAPI document describes the real API: every path of
//! `sless_wire::paths`, the request schemas, and the bearer scheme.

mod support;

use serde_json::Value;
use sless_wire::paths;
use support::Operator;

#[tokio::test]
async fn openapi_document_covers_the_api() {
    let op = Operator::start();
    let r = reqwest::get(format!("{}{}", op.base_url, paths::OPENAPI))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let doc: Value = serde_json::from_str(&r.text().await.unwrap()).expect("valid JSON");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));

    // Every path the wire crate builds, in template form.
    let (ns, name) = ("{ns}", "{name}");
    let documented = doc["paths"].as_object().expect("paths");
    for path in [
        paths::HEALTHZ.to_string(),
        paths::OPENAPI.to_string(),
        paths::ensure_namespace(ns),
        paths::functions(ns),
        paths::function(ns, name),
        paths::function_code(ns, name),
        paths::function_logs(ns, name),
        paths::function_invoke(ns, name),
    ] {
        assert!(documented.contains_key(&path), "{path} is not documented");
    }
    // Methods match the router.
    let fp = paths::functions(ns);
    assert!(documented[&fp]["get"].is_object() && documented[&fp]["post"].is_object());
    let f = paths::function(ns, name);
    for m in ["get", "patch", "delete"] {
        assert!(documented[&f][m].is_object(), "{f} {m}");
    }
    let upload = &documented[&paths::function_code(ns, name)]["put"];
    assert!(upload.is_object());
    let sha = upload["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "sha256")
        .expect("sha256 parameter");
    assert_eq!(sha["in"], "query");
    assert_eq!(sha["required"], true);
    assert_eq!(
        upload["requestBody"]["content"]["application/zip"]["schema"]["format"],
        "binary"
    );
    assert!(documented[&paths::function_invoke(ns, name)]["post"].is_object());

    // The request schema of create, with its fields.
    let schemas = &doc["components"]["schemas"];
    let create = &schemas["CreateFunction"];
    assert!(create.is_object(), "CreateFunction schema missing");
    for field in [
        "name",
        "runtime",
        "entrypoint",
        "env_vars",
        "memory_mb",
        "timeout_sec",
    ] {
        assert!(
            create["properties"][field].is_object(),
            "CreateFunction.{field} missing: {create}"
        );
    }
    for s in [
        "UpdateFunction",
        "Function",
        "FunctionList",
        "ErrorBody",
        "NamespaceInfo",
    ] {
        assert!(schemas[s].is_object(), "schema {s} missing");
    }
    // Create's request body refers to that schema, and the API is bearer-protected.
    let body = &documented[&fp]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(
        body["$ref"], "#/components/schemas/CreateFunction",
        "{body}"
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );

    // `sless-operator openapi` prints the same document.
    let out = std::process::Command::new(support::operator_bin())
        .arg("openapi")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, doc);
}
