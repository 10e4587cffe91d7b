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
        paths::METRICS.to_string(),
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

#[tokio::test]
async fn json_logs_public_url_and_no_tokens_in_logs() {
    let op = Operator::start_with(&[
        "--log-format",
        "json",
        "--public-url",
        "https://sless.example:9443/",
    ]);
    let c = op.client("logger");
    let (code, body) = c
        .create(serde_json::json!({
            "name": "logged", "runtime": "python3.11", "entrypoint": "main.handler"
        }))
        .await;
    assert_eq!(code, 201, "{body}");
    // Returned URLs use the public URL.
    let r = c
        .req(reqwest::Method::POST, &paths::functions(&c.namespace))
        .json(&serde_json::json!({
            "name": "located", "runtime": "python3.11", "entrypoint": "main.handler"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(
        r.headers()["location"],
        format!(
            "https://sless.example:9443{}",
            paths::function(&c.namespace, "located")
        )
        .as_str()
    );
    // A rejected token is logged by reason, never by value.
    let bad = format!("{}x", c.token);
    let r = reqwest::Client::new()
        .get(c.url(&paths::functions(&c.namespace)))
        .bearer_auth(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    let log = op.log();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in &lines {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
    assert!(log.contains("sless-operator listening"), "{log}");
    assert!(log.contains("request not authenticated"), "{log}");
    assert!(!log.contains(&c.token), "a token was logged");
    assert!(!log.contains(&bad), "a token was logged");
    let signature = c.token.rsplit('.').next().unwrap();
    assert!(!log.contains(signature), "a token signature was logged");
}

/// The value of `sless_http_requests_total{code="<class>"}` in a scrape.
fn http_requests(text: &str, class: &str) -> u64 {
    let series = format!("sless_http_requests_total{{code=\"{class}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn metrics_are_served_without_a_token_and_count_requests() {
    let op = Operator::start();
    let http = reqwest::Client::new();
    let scrape = |token: Option<&'static str>| {
        let mut req = http.get(format!("{}{}", op.base_url, paths::METRICS));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            assert_eq!(
                r.headers()["content-type"],
                "text/plain; version=0.0.4; charset=utf-8"
            );
            r.text().await.unwrap()
        }
    };
    let before = scrape(None).await;
    assert!(
        before.contains("# TYPE sless_http_requests_total counter\n"),
        "{before}"
    );
    assert!(
        http_requests(&before, "2xx") >= 1,
        "the harness waited on /healthz"
    );
    for path in [paths::HEALTHZ, paths::HEALTHZ, "/no-such-endpoint"] {
        http.get(format!("{}{path}", op.base_url))
            .send()
            .await
            .unwrap();
    }
    let unauthenticated = http
        .get(format!(
            "{}{}",
            op.base_url,
            paths::functions("sless-00000000")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status().as_u16(), 401);
    // A token is neither needed nor checked.
    let after = scrape(Some("not-a-token")).await;
    // The first scrape and two /healthz; a 404 and a 401.
    assert_eq!(
        http_requests(&after, "2xx") - http_requests(&before, "2xx"),
        3,
        "{after}"
    );
    assert_eq!(
        http_requests(&after, "4xx") - http_requests(&before, "4xx"),
        2,
        "{after}"
    );
    assert_eq!(http_requests(&after, "5xx"), 0, "{after}");
    // The local backend has no series of its own.
    assert!(!after.contains("sless_reconciles_total"), "{after}");
}
