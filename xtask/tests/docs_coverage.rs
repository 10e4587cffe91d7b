//! Docs cannot drift from code: every attribute of the provider's real schema (read from
//! the built binary with `terraform providers schema -json`) must appear, backticked, in
//! its registry doc page; and the examples must be `terraform fmt`-clean.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use support::{debug_provider, run, terraform, text, workspace};

/// Attribute and nested block names of a schema block, recursively, as dotted paths
/// (the last segment is what the docs must mention).
fn names(block: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    if let Some(attrs) = block.get("attributes").and_then(|a| a.as_object()) {
        for (name, attr) in attrs {
            out.push(format!("{prefix}{name}"));
            if let Some(nested) = attr.get("nested_type") {
                names(nested, &format!("{prefix}{name}."), out);
            }
        }
    }
    if let Some(blocks) = block.get("block_types").and_then(|b| b.as_object()) {
        for (name, b) in blocks {
            out.push(format!("{prefix}{name}"));
            if let Some(inner) = b.get("block") {
                names(inner, &format!("{prefix}{name}."), out);
            }
        }
    }
}

fn provider_schema() -> serde_json::Value {
    let bin = debug_provider();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let plugin_dir = bin.parent().unwrap();
    let cli = dir.join("cli.tfrc");
    std::fs::write(
        &cli,
        format!(
            "provider_installation {{\n  dev_overrides {{\n    \"registry.terraform.io/sless/sless\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            plugin_dir.display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("main.tf"),
        "terraform {\n  required_providers {\n    sless = {\n      source = \"sless/sless\"\n    }\n  }\n}\n\nprovider \"sless\" {}\n",
    )
    .unwrap();
    // dev_overrides: `providers schema` runs the override binary without `terraform init`
    // (checked on Terraform 1.0.3 and 1.11).
    let out = run(terraform(dir, dir, &cli, None).args(["providers", "schema", "-json"]));
    assert!(
        out.status.success(),
        "terraform providers schema failed:\n{}",
        text(&out)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("providers schema printed no JSON ({e}):\n{}", text(&out)));
    json["provider_schemas"]["registry.terraform.io/sless/sless"].clone()
}

fn missing_in(doc: &Path, wanted: &[String], report: &mut BTreeMap<String, Vec<String>>) {
    let rel = doc
        .strip_prefix(workspace())
        .unwrap_or(doc)
        .display()
        .to_string();
    let Ok(text) = std::fs::read_to_string(doc) else {
        report.insert(rel, vec!["(the page does not exist)".into()]);
        return;
    };
    let missing: Vec<String> = wanted
        .iter()
        .filter(|path| {
            let leaf = path.rsplit('.').next().unwrap_or(path);
            !text.contains(&format!("`{leaf}`")) && !text.contains(&format!("`{path}`"))
        })
        .cloned()
        .collect();
    if !missing.is_empty() {
        report.insert(rel, missing);
    }
}

#[test]
fn every_schema_attribute_is_documented() {
    let schema = provider_schema();
    assert!(
        schema.is_object(),
        "the provider's schema is missing from `terraform providers schema -json`"
    );
    let docs = workspace().join("docs");
    let mut report = BTreeMap::new();

    let mut provider = Vec::new();
    names(&schema["provider"]["block"], "", &mut provider);
    missing_in(&docs.join("index.md"), &provider, &mut report);

    let mut counted = provider.len();
    for (kind, dir) in [
        ("resource_schemas", "resources"),
        ("data_source_schemas", "data-sources"),
    ] {
        for (type_name, s) in schema[kind].as_object().into_iter().flatten() {
            let short = type_name.strip_prefix("sless_").unwrap_or(type_name);
            let mut attrs = Vec::new();
            names(&s["block"], "", &mut attrs);
            counted += attrs.len();
            missing_in(
                &docs.join(dir).join(format!("{short}.md")),
                &attrs,
                &mut report,
            );
        }
    }
    assert!(counted > 0, "the schema has no attributes at all: {schema}");
    assert!(
        report.is_empty(),
        "schema attributes missing from the docs (write them as `name`):\n{}",
        report
            .iter()
            .map(|(page, names)| format!("  {page}: {}", names.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn examples_are_terraform_fmt_clean() {
    let examples = workspace().join("examples");
    assert!(examples.is_dir(), "{} is missing", examples.display());
    let tmp = tempfile::tempdir().unwrap();
    let cli = tmp.path().join("empty.tfrc");
    std::fs::write(&cli, "").unwrap();
    let out = run(terraform(&workspace(), tmp.path(), &cli, None).args([
        "fmt",
        "-check",
        "-recursive",
        "-diff",
        "-no-color",
        "examples/",
    ]));
    assert!(
        out.status.success(),
        "`terraform fmt -check -recursive examples/` found unformatted files:\n{}",
        text(&out)
    );
}
